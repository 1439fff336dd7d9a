"""Which proxy the API client uses. In a pod (in-cluster config) the API server is reached directly: HTTPS_PROXY
and NO_PROXY from the chart's extraEnv are for the answers from outside (the fence webhook, the BMCs, the
Pushgateway), and a proxy that cannot reach the service IP must not fail every pass. With a kubeconfig the
client does as kubectl does: the environment's proxy, or the kubeconfig's proxy-url."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import urllib3

from rwo_failover.kube.credentials import load_api_client
from rwo_failover.settings import load

PROXY = "http://proxy.corp.example:3128"


def _service_account(folder: Path) -> Path:
    folder.mkdir()
    (folder / "token").write_text("a-service-account-token")
    (folder / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")  # the loader checks only that it is not empty
    return folder


def _settings(environ: dict[str, str]):
    return load([], environ)[1]


def test_in_cluster_the_api_server_is_reached_directly_whatever_the_proxy_variables_say(tmp_path, monkeypatch):
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(name, PROXY)
    monkeypatch.setenv("NO_PROXY", "fence-webhook.example")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    client = load_api_client(_settings({}), service_account=_service_account(tmp_path / "sa"))
    assert client.configuration.host == "https://10.96.0.1:443"
    assert client.configuration.proxy is None
    assert not isinstance(client.rest_client.pool_manager, urllib3.ProxyManager)


@pytest.mark.parametrize("proxy_url", [None, "http://from-kubeconfig.example:3128"])
def test_with_a_kubeconfig_the_client_takes_the_proxy_kubectl_would(tmp_path, monkeypatch, proxy_url):
    monkeypatch.setenv("HTTPS_PROXY", PROXY)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    cluster = {"server": "https://api.example:6443", **({"proxy-url": proxy_url} if proxy_url else {})}
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    client = load_api_client(_settings({"KUBECONFIG": str(kubeconfig)}))
    assert client.configuration.proxy == (proxy_url or PROXY)
    assert isinstance(client.rest_client.pool_manager, urllib3.ProxyManager)
