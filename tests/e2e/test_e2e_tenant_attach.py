"""A tenant's pod bound to a stopped node gets its own claim attached there, on a real control plane.

The attach-detach controller writes a VolumeAttachment for any pod scheduled to a node it manages, whatever
the node's state: a tenant that sets spec.nodeName to a stopped node (tolerating every taint, so the taint
manager leaves the pod) and mounts its own RWO claim gets that attachment. planner/evidence.py counts an
attachment toward the brakes only when it was made before the node's last sign of life. A module of its own:
it needs stopped nodes that hold nothing else.
"""

from __future__ import annotations

import time

import pytest

from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit.control_plane import NODE_MONITOR_GRACE_SECONDS
from rwo_testkit.e2e import CLOUD_TAINT, PASS_ENV, record, wait_for
from rwo_testkit.node_sim import STORAGE_CLASS

pytestmark = pytest.mark.e2e

STOPPED = ("ta-stopped-1", "ta-stopped-2")


def tenant_pod_on(cluster, node: str) -> str:
    """The tenant's claim, bound to a PV (as dynamic provisioning would make), and a pod naming `node`."""
    claim, pv = f"junk-{node}", f"pv-tenant-junk-{node}"
    cluster.sim.add_volume(pv, "tenant", claim)
    cluster.kube.create("/api/v1/namespaces/tenant/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": STORAGE_CLASS, "volumeName": pv,
                 "resources": {"requests": {"storage": "1Gi"}}}})
    wait_for(f"{claim} Bound", lambda: (cluster.kube.get(f"/api/v1/namespaces/tenant/persistentvolumeclaims/{claim}")
                                        or {}).get("status", {}).get("phase") == "Bound", 60)
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": claim},
            "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}], "automountServiceAccountToken": False,
                     "containers": [{"name": "c", "image": "sim"}],
                     "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]}}

    def create():
        try:
            return cluster.kube.create("/api/v1/namespaces/tenant/pods", body)
        except Exception:
            return None
    wait_for(f"tenant pod on {node} created", create, 60, every=1)
    return pv


def any_attachment(cluster, pv: str, node: str):
    return next((va for va in cluster.kube.items("/apis/storage.k8s.io/v1/volumeattachments")
                 if va["spec"]["source"].get("persistentVolumeName") == pv and va["spec"]["nodeName"] == node), None)


def test_tenant_pods_bound_to_stopped_nodes_get_attachments_there_that_never_move_the_nodes_brake(cluster):
    """The attachments are made after the nodes went down (creationTimestamp after the Lease's last renewal,
    both stamped by the API server): they never count, and no kubelet ran the pods (no status.startTime)."""
    sa = cluster.install_rbac()
    for name in ("ta-live-1", "ta-live-2", "ta-live-3") + STOPPED:
        cluster.sim.add_node(name)
    for name in STOPPED:
        cluster.sim.power_off(name)
    for name in STOPPED:
        wait_for(f"{name} NotReady", lambda n=name: cluster.ready(n) == "Unknown", NODE_MONITOR_GRACE_SECONDS + 30)
        cluster.taint(name, CLOUD_TAINT)
    cluster.namespace("tenant")
    down_at = time.time()

    pvs = {node: tenant_pod_on(cluster, node) for node in STOPPED}
    attachments = {node: wait_for(f"{pv} attached to {node}", lambda p=pv, n=node: any_attachment(cluster, p, n), 90)
                   for node, pv in pvs.items()}
    record("tenant pods bound to stopped nodes: the attach-detach controller attached their claims there, "
           + ", ".join(f"{node} at {va['metadata']['creationTimestamp']}" for node, va in attachments.items())
           + f" (nodes Ready=Unknown and shutdown-tainted by {time.strftime('%H:%M:%S', time.gmtime(down_at))}Z)")
    time.sleep(int(PASS_ENV["MIN_NOT_READY_SECONDS"]))

    def both_down():  # a dry run writes nothing: wait until both stopped nodes are proven down
        dry = cluster.run_pass(sa, DRY_RUN="true", MAX_NODES_PER_PASS="10")
        verdicts = {line["node"]: line["state"] for line in dry.logs if line.get("message") == "node verdict"}
        return all(verdicts.get(node) == "down" for node in STOPPED) or None
    wait_for("both stopped nodes proven down", both_down, 90, every=3)

    result = cluster.run_pass(sa, MAX_NODES_PER_PASS="1")

    assert result.code == EXIT_OK, (result.summary.get("refusal"), result.stderr[-2000:])
