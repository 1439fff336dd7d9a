"""Kubernetes without the 6-minute safety valve (issue 27, item 5): kube-controller-manager with
`--disable-force-detach-on-timeout=true` (1.30+; some managed offerings set it) never force-detaches a volume
from an unhealthy node on its own. There, only the out-of-service path frees a dead node's volumes.

One cluster, two dead nodes at once, each with a StatefulSet and a Deployment holding RWO claims: rwo-failover
frees one; the other is opted out (`rwo-failover.io/opt-out`), which is the same cluster without the tool, and
must not recover within WINDOW_SECONDS of its power-off. The pods tolerate the node's taints for only
EVICT_AFTER seconds, so taint eviction (and with it the Deployment's replacement) comes early and the
6-minute detach timeout, were it on, would have run out well inside the window.
"""

from __future__ import annotations

import time

import pytest

from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit.e2e import CLOUD_TAINT, OOS_KEY, record, wait_for

pytestmark = pytest.mark.e2e
CONTROLLER_MANAGER_ARGS = ("--disable-force-detach-on-timeout=true",)
WINDOW_SECONDS = 450  # 7.5 min: past eviction (about 30 s) plus the 6-minute timeout it disables
EVICT_AFTER = 10
APPS = (("statefulset", "db"), ("deployment", "web"))


@pytest.fixture(scope="module")
def sa(cluster):
    for name in ("live-a", "live-b", "live-c", "live-d"):
        cluster.sim.add_node(name)
    return cluster.install_rbac()


def pv(namespace: str, app: str) -> str:
    return f"pv-{namespace}-{app}"


def recovered(cluster, namespace: str, app: str, dead: str) -> str | None:
    """The node a replacement of the app runs on, Running and Ready with its volume attached there."""
    pod = cluster.running_app(namespace, app, not_on=dead)
    if pod and cluster.attached(pv(namespace, app), pod["spec"]["nodeName"]):
        return pod["spec"]["nodeName"]
    return None


def placed(cluster, namespace: str, app: str, *, node: str) -> None:
    """Waits until the app runs on `node` with its volume attached there."""
    pod = wait_for(f"{namespace}/{app} running", lambda: cluster.running_app(namespace, app), 90)
    assert pod["spec"]["nodeName"] == node, f"{namespace}/{app} runs on {pod['spec']['nodeName']}"
    wait_for(f"{namespace}/{app} attached", lambda: cluster.attached(pv(namespace, app), node), 30)


def power_off_and_watch(cluster, sa, nodes: dict[str, str]) -> tuple[dict[str, float], list[int]]:
    """Both nodes powered off at once and watched for WINDOW_SECONDS: each gets the cloud's shutdown taint at
    NotReady; once the tool's node has it, a pass runs each round until the tool's apps are freed; the opted-out
    apps must never recover. When each of the tool's apps was freed (seconds from power-off), and the passes'
    exit codes."""
    off = time.monotonic()
    for node in nodes.values():
        cluster.sim.power_off(node)
    tainted: set[str] = set()
    freed: dict[str, float] = {}
    codes: list[int] = []
    while time.monotonic() < off + WINDOW_SECONDS:
        for node in set(nodes.values()) - tainted:  # the cloud's shutdown taint at NotReady, on both
            if cluster.ready(node) != "True":
                cluster.taint(node, CLOUD_TAINT)
                tainted.add(node)
        if nodes["tool"] in tainted and len(freed) < len(APPS):
            codes.append(cluster.run_pass(sa).code)
        for _, app in APPS:
            if app not in freed and recovered(cluster, "tool", app, nodes["tool"]):
                freed[app] = time.monotonic() - off
                print(f"tool/{app} freed {freed[app]:.0f}s after power-off", flush=True)
            assert not recovered(cluster, "bare", app, nodes["bare"]), \
                f"bare/{app} recovered without the tool after {time.monotonic() - off:.0f}s"
        time.sleep(2 if len(freed) < len(APPS) else 10)
    return freed, codes


@pytest.mark.timeout(WINDOW_SECONDS + 300)  # the window, and the set-up before it
def test_only_the_out_of_service_path_frees_a_dead_node_without_force_detach(cluster, sa):
    kcm = cluster.cp.workdir / "kube-controller-manager.log"
    nodes = {"tool": "nfd-tool", "bare": "nfd-bare"}
    cluster.sim.add_node(nodes["tool"])
    cluster.sim.add_node(nodes["bare"], labels={"rwo-failover.io/opt-out": "true"})
    for namespace, node in nodes.items():
        for kind, app in APPS:
            getattr(cluster, kind)(namespace, app, node_affinity=node, evict_after=EVICT_AFTER)
    for namespace, node in nodes.items():
        for _, app in APPS:
            placed(cluster, namespace, app, node=node)

    freed, codes = power_off_and_watch(cluster, sa, nodes)

    assert set(codes) == {EXIT_OK}, codes
    assert set(freed) == {app for _, app in APPS}, f"freed by rwo-failover: {freed}"
    assert any(t["key"] == OOS_KEY for t in cluster.taints(nodes["tool"]))
    assert not any(t["key"] == OOS_KEY for t in cluster.taints(nodes["bare"])), "opted out: never touched"
    for _, app in APPS:  # still held by the dead node: attached there, nothing Running elsewhere
        assert cluster.attached(pv("bare", app), nodes["bare"]), f"bare/{app}'s volume was detached"
    assert "disable-force-detach-on-timeout" in " ".join(CONTROLLER_MANAGER_ARGS) and kcm.exists()
    record(f"no force-detach (--disable-force-detach-on-timeout=true): rwo-failover freed the StatefulSet in "
           f"{freed['db']:.0f}s and the Deployment in {freed['web']:.0f}s from power-off; without the tool neither "
           f"recovered within {WINDOW_SECONDS}s (pods evicted after {EVICT_AFTER}s)")
