"""Watches on a real kube-apiserver: what the fixture's watches must match, and the watch-driven loop
surviving the API server's restart under it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from rwo_failover import config
from rwo_failover.client import Api, load_api_client
from rwo_testkit import fake_cluster as fc
from rwo_testkit.e2e import PASS_ENV, REPO, outage, record, wait_for
from rwo_testkit.fake_apiserver import FakeApiServer

pytestmark = pytest.mark.e2e


def api_for(kubeconfig: str) -> Api:
    settings = config.load(["--interval", "5"], {"KUBECONFIG": str(kubeconfig)})[1]
    return Api(load_api_client(settings), settings)


def watch_facts(kubeconfig: str, make_node, delete_node) -> dict:
    """What a watch shows on this server: the answer to a version long gone, the events of a create,
    an update and a delete, and whether a bookmark comes before a short timeout."""
    api = api_for(kubeconfig)
    facts: dict = {}
    try:
        list(api.watch("nodes", "/api/v1/nodes", "1", 5, k8s_watch.Watch()))
        facts["too old"] = "no error"
    except ApiException as err:
        facts["too old"] = (err.status, err.reason.split(":")[0])
    api.list_nodes(lambda n: n)
    start = api.listed_version
    make_node("parity", "True")
    make_node("parity", "False")
    delete_node("parity")
    events = list(api_for(kubeconfig).watch("nodes", "/api/v1/nodes", start, 4, k8s_watch.Watch()))
    mine = [e for e in events if e["raw_object"]["metadata"].get("name") == "parity"]
    facts["events"] = [e["type"] for e in mine]
    versions = [int(e["raw_object"]["metadata"]["resourceVersion"]) for e in mine]
    facts["versions rise"] = versions == sorted(set(versions))
    facts["bookmark before the timeout"] = any(e["type"] == "BOOKMARK" for e in events)
    return facts


def test_the_fixture_watches_as_the_real_api_server_does(cluster, tmp_path):
    def real_node(name: str, ready: str) -> None:
        found = cluster.kube.get(f"/api/v1/nodes/{name}")
        if found is None:
            cluster.kube.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
        else:
            cluster.kube.patch(f"/api/v1/nodes/{name}", {"metadata": {"labels": {"ready": ready}}})
    real = watch_facts(str(cluster.kubeconfig), real_node, lambda name: cluster.kube.delete(f"/api/v1/nodes/{name}"))
    with FakeApiServer() as fake:
        fake.bookmark_seconds = 60  # as kube-apiserver: about every minute, and 2 s before the timeout
        fc.live_node(fake, "other")
        fake.compact("nodes")  # the fixture keeps everything unless compacted; the real cache does not

        def fake_node(name: str, ready: str) -> None:
            fake.add(fc.node(name, ready=ready))

        mimic = watch_facts(fake.write_kubeconfig(str(tmp_path / "kubeconfig")), fake_node,
                            lambda name: fake.remove("nodes", name))
    assert real == {"too old": (410, "Expired"), "events": ["ADDED", "MODIFIED", "DELETED"], "versions rise": True,
                    "bookmark before the timeout": True}, real
    assert mimic == real


def test_the_watching_loop_fails_over_after_the_api_server_restarts_under_it(cluster, tmp_path):
    sa = cluster.install_rbac()
    for name in ("wr-live", "wr-victim"):
        cluster.sim.add_node(name)
    cluster.statefulset("watch-restart", "db", node_affinity="wr-victim")
    out = (tmp_path / "loop.log").open("w")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(cluster.cp.workdir), "KUBECONFIG": str(sa),
           "INTERVAL": "15", "METRICS_PORT": "0", "WATCH_STALE_SECONDS": "20", **PASS_ENV}
    proc = subprocess.Popen([sys.executable, str(REPO / "reconcile.py")], cwd=REPO, env=env, stdout=out,
                            stderr=subprocess.STDOUT)
    try:
        wait_for("the first pass", lambda: '"pass finished"' in (tmp_path / "loop.log").read_text(), 60)
        down = cluster.cp.restart_apiserver()
        timing = outage(cluster, "watch-restart", "db", "wr-victim", lambda: None, timeout=180)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        out.close()
    logs = [json.loads(line) for line in (tmp_path / "loop.log").read_text().splitlines() if line.startswith("{")]
    assert timing is not None, "the replacement never ran"
    assert proc.returncode == 0
    resumed = [line for line in logs if line["message"] in ("watch interrupted; resuming", "listed")
               and line.get("reason") not in (None, "initial")]
    assert resumed, "the watch noticed the restart"
    record(f"watch-driven loop after a kube-apiserver restart ({down:.1f}s down): replacement Running and Ready "
           f"{timing.from_taint:.0f}s after the shutdown taint, {timing.from_power_off:.0f}s after power-off")
