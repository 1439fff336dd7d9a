"""Attacks on "convert less" (Snapshot.marked, kube/keep.py, decode.Memo), fixture tier, real client.

Each test here showed a defect the change brought in, failing on the code it was written against (as a strict
xfail until the fix): decode.Memo kept the last list's conversions alive after the watch had replaced or deleted
the objects, until the next relist (which a healthy watch never makes).
"""

from __future__ import annotations

import gc
import time
import weakref

from rwo_failover import settings as config
from rwo_failover.kube import Api, load_api_client
from rwo_failover.kube.reflector import Reflector
from rwo_failover.kube.sources import pods_on
from rwo_failover.model import Pod
from rwo_testkit import fake_cluster as fc


def wait_until(what: str, check, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def watched_tenant_pods(api, kubeconfig: str, namespace: str, names: list[str]) -> Reflector:
    """Tenant pods with bulky labels on the proven-down node "dead", and continuous mode's watch of that node's
    pods, listed and watching (as DownNodePods.follow runs it): the caller stops it."""
    fc.dead_node(api, "dead")
    for name in names:
        api.add(fc.pod(name, "dead", namespace=namespace, owner=None, terminating=True,
                       labels={f"tenant.example.com/k{j:04d}": "x" * 63 for j in range(200)}))
    settings = config.load(["--interval", "5"], {"KUBECONFIG": kubeconfig, "WATCH_STALE_SECONDS": "5"})[1]
    api_client = load_api_client(settings)
    watched = Reflector(pods_on("dead"), lambda: Api(api_client, settings), settings,
                        on_change=lambda _why: None)
    watched.relist("initial", watched.new_api())
    watched.start()
    wait_until("the pod watch", lambda: any(r.verb == "watch" for r in api.requests))
    return watched


def test_a_tenant_pod_deleted_from_a_watched_node_is_released_once_the_watch_removes_it(api, kubeconfig):
    """Continuous mode watches the pods on each proven-down node (kube/pod_watch.py). A tenant may bind any number
    of pods to such a node, each with labels up to the object limit (the Pod model keeps its labels). Once a
    tenant deletes them and the watch has dropped them from the cache, nothing of them may stay in memory: else
    the watch holds what it listed plus what it holds now (the tenant deletes and re-creates its pods: twice the
    memory), for as long as no relist comes (a healthy watch never relists)."""
    watched = watched_tenant_pods(api, kubeconfig, "tenant", [f"junk-{i}" for i in range(3)])
    try:
        listed = [weakref.ref(p) for p in watched.items.values() if isinstance(p, Pod)]
        assert len(listed) == 3

        for i in range(3):
            api.remove("pods", f"junk-{i}", "tenant")
        wait_until("the deletes applied", lambda: not watched.items)
        gc.collect()

        assert [ref() for ref in listed if ref() is not None] == [], "deleted pods still held in memory"
    finally:
        watched.stop()
