"""Our out-of-service taint on the real control plane (issue 27): on before any VolumeAttachment of the node is
released, and lifted only after the machine rebooted.

ceph-csi 3.15+ blocklists a node's clients in ControllerUnpublishVolume only when the node carries the
out-of-service taint at that moment; the simulated attacher records what it would have seen
(`NodeSimulator.unpublished`). The kubelet reports a new `status.nodeInfo.bootID` at every boot; the simulator's
`power_on` is a boot and its `reconnect` a machine that was only cut off.
"""

from __future__ import annotations

import json
import time

import pytest

from rwo_failover.model.taint_record import record_name
from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit.e2e import CLOUD_TAINT, OOS_KEY, outage, record, wait_for

pytestmark = pytest.mark.e2e
RECOVERY = {"RECOVERY_SECONDS": "20"}
RECORDS = "rwo-failover"  # RECOVERY_NAMESPACE's default, where our taint records live


@pytest.fixture(scope="module")
def sa(cluster):
    for name in ("live-a", "live-b", "live-c"):
        cluster.sim.add_node(name)
    return cluster.install_rbac()


@pytest.mark.parametrize("mode, fenced", [("auto", True), ("never", False)])
def test_every_attachment_is_released_while_the_node_carries_the_taint(cluster, sa, mode, fenced):
    """With the handoff on, ControllerUnpublishVolume always finds the taint (Ceph fences); with it off, never
    (the control: the simulated driver does tell the two apart)."""
    node, namespace = f"ceph-{mode}", f"ceph-{mode}"
    cluster.sim.add_node(node)
    cluster.statefulset(namespace, "db", node_affinity=node)
    codes: list[int] = []
    env = {"OUT_OF_SERVICE_TAINT": mode}

    timing = outage(cluster, namespace, "db", node=node, act=lambda: codes.append(cluster.run_pass(sa, **env).code))

    assert timing is not None, f"no replacement; pass exit codes {codes}"
    assert set(codes) == {EXIT_OK}, codes
    seen = [tainted for _, on, tainted in cluster.sim.unpublished if on == node]
    assert seen and set(seen) == {fenced}, cluster.sim.unpublished
    record(f"ceph-csi contract, OUT_OF_SERVICE_TAINT={mode}: {len(seen)} ControllerUnpublishVolume call(s) on the "
           f"dead node, {'all' if fenced else 'none'} with the out-of-service taint on; replacement "
           f"{timing.from_taint:.0f}s after the shutdown taint")
    cluster.sim.remove_node(node)


def taint_record(cluster, node_uid: str) -> dict | None:
    """Our record of the out-of-service taint we added to the node with that uid, as its data says."""
    found = cluster.kube.get(f"/api/v1/namespaces/{RECORDS}/configmaps/{record_name(node_uid)}")
    return json.loads(found["data"]["record"]) if found else None


def kept_warnings(cluster, node: str) -> list[dict]:
    return [e for e in cluster.kube.items("/api/v1/namespaces/default/events",
                                          fieldSelector=f"involvedObject.name={node}")
            if e["reason"] == "OutOfServiceTaintKept" and e["type"] == "Warning"]


def test_our_taint_stays_until_the_machine_reboots(cluster, sa):
    node = "boot-node"
    cluster.sim.add_node(node)
    cluster.statefulset("boot", "db", node_affinity=node)
    booted = cluster.node(node)["status"]["nodeInfo"]["bootID"]
    timing = outage(cluster, "boot", "db", node=node, act=lambda: cluster.run_pass(sa))
    assert timing is not None
    uid = cluster.node(node)["metadata"]["uid"]
    ours = taint_record(cluster, uid)  # our record, where the node cannot write; nothing of ours on the Node
    assert ours is not None and (ours["bootID"], ours["nodeUID"]) == (booted, uid), ours
    assert not [k for k in cluster.node(node)["metadata"].get("annotations", {}) if k.startswith("rwo-failover.io/")]

    # Its network comes back; the machine never went down: Ready, a fresh Lease, the same bootID.
    cluster.sim.reconnect(node)
    cluster.untaint(node, CLOUD_TAINT["key"])
    back = time.monotonic()
    wait_for(f"{node} Ready", lambda: cluster.ready(node) == "True", 30)
    time.sleep(max(0.0, back + 22 - time.monotonic()))
    for _ in range(2):
        kept = cluster.run_pass(sa, **RECOVERY)
        assert kept.code == EXIT_OK and kept.summary["taints_removed"] == 0, kept.logs
    assert cluster.node(node)["status"]["nodeInfo"]["bootID"] == booted
    assert any(t["key"] == OOS_KEY for t in cluster.taints(node)), "no reboot, no removal"
    [warning] = kept_warnings(cluster, node)
    assert "without rebooting" in warning["message"]

    # The machine is power-cycled: a new bootID, and after RECOVERY_SECONDS our taint comes off.
    cluster.sim.power_off(node)
    cluster.sim.power_on(node)
    rebooted = time.monotonic()
    wait_for("a new bootID", lambda: cluster.node(node)["status"]["nodeInfo"]["bootID"] != booted, 30)
    early = cluster.run_pass(sa, **RECOVERY)
    assert early.code == EXIT_OK and early.summary["taints_removed"] == 0, "not before RECOVERY_SECONDS"
    time.sleep(max(0.0, rebooted + 22 - time.monotonic()))
    late = cluster.run_pass(sa, **RECOVERY)
    assert late.code == EXIT_OK and late.summary["taints_removed"] == 1, late.logs
    assert not any(t["key"] == OOS_KEY for t in cluster.taints(node))
    assert taint_record(cluster, uid) is None, "the record goes with the taint"
    record(f"reboot rule: our taint kept on a node back without rebooting ({len(kept_warnings(cluster, node))} "
           "OutOfServiceTaintKept Warning), removed 20 s (RECOVERY_SECONDS) after a power cycle")
    cluster.sim.remove_node(node)
