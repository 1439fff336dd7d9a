"""Liveness by observed change, on a real control plane (issue 17).

The real node lifecycle controller, attach-detach controller and StatefulSet controller; simulated kubelets,
some with the kubelet's default 40 s Lease against a 20 s node-monitor grace, one with a clock 100 s slow.
The reconciler runs as deployed (rbac.yaml's ServiceAccount), a pass every 2 s.
"""

from __future__ import annotations

import time

import pytest

from rwo_failover.run.exitcodes import EXIT_OK, EXIT_REFUSED
from rwo_testkit.control_plane import NODE_MONITOR_GRACE_SECONDS
from rwo_testkit.e2e import CLOUD_TAINT, OOS_KEY, outage, record, wait_for

pytestmark = pytest.mark.e2e
KUBELET_DEFAULT_LEASE = 40


@pytest.fixture(scope="module")
def sa(cluster):
    for name in ("live-a", "live-b"):
        cluster.sim.add_node(name)
    return cluster.install_rbac()


def warnings(cluster, reason: str) -> list[dict]:
    return [e for e in cluster.kube.items("/api/v1/namespaces/default/events") if e["reason"] == reason]


def test_the_real_server_stamps_what_the_fixture_does(cluster):
    """Fixture parity: a change to a Lease stamps its writer's managedFields time and a new resourceVersion;
    a write that changes nothing stamps nothing (rwo_testkit/managed_fields.py)."""
    cluster.sim.add_node("parity")
    cluster.sim.power_off("parity")  # so no renewal lands between our writes
    time.sleep(1)
    path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/parity"
    before = cluster.kube.get(path)
    cluster.kube.patch(path, {"spec": {"holderIdentity": before["spec"]["holderIdentity"]}})
    assert cluster.kube.get(path)["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    time.sleep(1.1)
    after = cluster.kube.patch(path, {"spec": {"renewTime": "2030-01-01T00:00:00.000000Z"}})
    assert after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]
    times = sorted(e["time"] for e in after["metadata"]["managedFields"])
    assert times[-1] > sorted(e["time"] for e in before["metadata"]["managedFields"])[-1]
    cluster.sim.remove_node("parity")


def test_a_grace_shorter_than_the_lease_never_cries_wolf(cluster, sa):
    """The kubelet's default 40 s Lease, a 20 s node-monitor grace: for 20 s after NotReady the Lease still
    looks fresh, but it was renewed before NotReady. Every pass exits 0 and no Warning is recorded."""
    node = "grace-victim"
    cluster.sim.add_node(node, lease_seconds=KUBELET_DEFAULT_LEASE)
    cluster.statefulset("grace", "db", node_affinity=node)
    codes: list[int] = []

    timing = outage(cluster, "grace", "db", node=node, act=lambda: codes.append(cluster.run_pass(sa).code))

    assert timing is not None, f"no replacement; pass exit codes {codes}"
    assert set(codes) == {EXIT_OK}, f"a normal outage never exits 3: {codes}"
    assert warnings(cluster, "ShutdownTaintOnLiveNode") == []
    record(f"grace {NODE_MONITOR_GRACE_SECONDS}s < Lease {KUBELET_DEFAULT_LEASE}s: {len(codes)} passes, all exit 0, "
           f"no Warning; replacement Ready {timing.from_power_off:.0f}s after power-off")
    cluster.sim.remove_node(node)


def test_a_live_node_with_a_slow_clock_is_never_failed_over(cluster, sa):
    """Its clock runs 100 s behind; it renews its Lease every few seconds; its container runtime is down, so
    it posts Ready=False; and it carries the cloud's shutdown taint by mistake. Judged by its own timestamps
    it looked down for good. Nothing of it may be touched, and the alarm must sound."""
    node = "slow-clock"
    cluster.sim.add_node(node, clock_offset=-100)
    cluster.statefulset("slow", "db", node_affinity=node)
    pod = wait_for("slow/db-0 running", lambda: cluster.running("slow", "db-0"), 60)
    assert pod["spec"]["nodeName"] == node
    wait_for("the volume attached", lambda: cluster.attached("pv-slow-db", node), 30)
    cluster.sim.runtime_down(node)
    wait_for(f"{node} NotReady", lambda: cluster.ready(node) == "False", 30)
    cluster.taint(node, CLOUD_TAINT)

    codes = []
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        codes.append(cluster.run_pass(sa).code)
        time.sleep(2)

    assert cluster.pod("slow", "db-0")["metadata"]["uid"] == pod["metadata"]["uid"], "its pod was not deleted"
    assert cluster.attached("pv-slow-db", node), "its volume stays attached"
    assert not any(t["key"] == OOS_KEY for t in cluster.taints(node))
    assert EXIT_REFUSED in codes and set(codes) <= {EXIT_OK, EXIT_REFUSED}, codes
    assert warnings(cluster, "ShutdownTaintOnLiveNode"), "the alarm sounds"
    record(f"a live node whose clock runs 100s slow, Ready=False, shutdown-tainted: {len(codes)} passes "
           f"({codes.count(EXIT_REFUSED)} exit 3, the rest 0), nothing touched")
    cluster.untaint(node, CLOUD_TAINT["key"])
    cluster.sim.remove_node(node)


def test_six_stopped_nodes_do_not_block_a_real_outage(cluster, sa):
    """Six stopped instances (Nodes kept, the cloud's shutdown taint, nothing on them) beside a real outage:
    more than MAX_NODES_PER_PASS=5, and more than half the nodes not Ready. The outage is failed over."""
    stopped = [f"stopped-{i}" for i in range(6)]
    for name in stopped:
        cluster.sim.add_node(name)
        cluster.sim.power_off(name)
    for name in stopped:
        wait_for(f"{name} NotReady", lambda n=name: cluster.ready(n) == "Unknown", 60)
        cluster.taint(name, CLOUD_TAINT)
    node = "beside-stopped"
    cluster.sim.add_node(node)
    cluster.statefulset("stopped", "db", node_affinity=node)
    codes: list[int] = []

    timing = outage(cluster, "stopped", "db", node=node, act=lambda: codes.append(cluster.run_pass(sa).code))

    assert timing is not None, f"no replacement; pass exit codes {codes}"
    assert set(codes) == {EXIT_OK}, codes
    assert all(not any(t["key"] == OOS_KEY for t in cluster.taints(n)) for n in stopped), "nothing to release"
    record(f"six stopped nodes beside an outage: failed over {timing.from_power_off:.0f}s after power-off, "
           f"{len(codes)} passes, all exit 0")
    for name in stopped + [node]:
        cluster.sim.remove_node(name)
