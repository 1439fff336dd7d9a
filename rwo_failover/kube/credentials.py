"""Cluster credentials: kubeconfig, or in-cluster config, into the official client's ApiClient."""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.incluster_config import InClusterConfigLoader

from .. import __version__
from ..settings import ConfigError, Settings

USER_AGENT = f"rwo-failover/{__version__}"
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")  # the pod's token and CA, by convention



def load_api_client(settings: Settings, *, service_account: Path = SERVICE_ACCOUNT) -> k8s.ApiClient:
    """Kubeconfig when one is given or present, else in-cluster config; ConfigError when neither works."""
    cfg = k8s.Configuration()
    path = settings.kubeconfig or os.path.expanduser("~/.kube/config")
    in_cluster = "KUBERNETES_SERVICE_HOST" in os.environ and not settings.kubeconfig
    try:
        if in_cluster and not os.path.exists(path):
            InClusterConfigLoader(  # type: ignore[no-untyped-call]  # kubernetes' config loaders are unannotated
                token_filename=str(service_account / "token"), cert_filename=str(service_account / "ca.crt"),
            ).load_and_set(client_configuration=cfg)
            # The service IP is inside the cluster: a proxy from the environment (the chart's extraEnv) is for the
            # answers from outside, and one that cannot reach the service IP would fail every pass.
            cfg.proxy = None
        else:
            _check_readable(path, settings.kubeconfig is not None)
            k8s_config.load_kube_config(config_file=path, context=settings.kube_context,  # type: ignore[no-untyped-call]  # unannotated, as above
                                        client_configuration=cfg, persist_config=False)
    except (ConfigException, OSError, ValueError, TypeError, yaml.YAMLError) as err:
        raise ConfigError(f"cannot load cluster credentials: {err}") from None
    cfg.retries = False  # tenacity owns every retry, so attempts are bounded and logged in one place
    api_client = k8s.ApiClient(cfg)
    api_client.user_agent = USER_AGENT  # so audit logs (and our RBAC test) can tell our calls apart
    return api_client


def _check_readable(path_list: str, given: bool) -> None:
    source = "KUBECONFIG" if given else "default kubeconfig"
    for path in path_list.split(os.pathsep):
        if not os.path.exists(path):
            raise ConfigError(f"{source} {path!r} does not exist (and this is not running in a pod)")
        if not os.access(path, os.R_OK):
            raise ConfigError(f"{source} {path!r} is not readable")
