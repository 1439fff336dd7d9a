"""The out-of-service taint: when to add it, what blocks it, and when ours comes off."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from ..model import POWER_CYCLED_ANNOTATION, Lease, Node, Pod, Snapshot, TaintRecord, boot_id_note, record_name
from ..settings import Settings
from .liveness import age, lease_fresh, ready_since
from .pods import protection
from .types import NodeState, NodeVerdict, Skip
from .undo import reboot_blocker as machine_not_rebooted

OUT_OF_SERVICE_SINCE = (1, 28)  # the out-of-service taint's force-detach is GA from Kubernetes 1.28


def wants_out_of_service(snapshot: Snapshot, settings: Settings) -> bool:
    if settings.out_of_service_taint == "auto":
        return snapshot.server_version is not None and snapshot.server_version >= OUT_OF_SERVICE_SINCE
    return settings.out_of_service_taint == "always"


def taint_blocker(pods: Sequence[Pod], snapshot: Snapshot, settings: Settings) -> str | None:
    """Why the out-of-service taint must not go on: Kubernetes would then delete *every* pod on the node,
    including one that a setting protects from us. Such a node gets the direct path only."""
    for pod in pods:
        reason = protection(pod, snapshot, settings)
        if reason:
            return (f"out-of-service taint not added: {pod.key} is protected ({reason}), and the taint would "
                    "let Kubernetes delete it; using direct deletes only")
    return None


def recovered(node: Node, lease: Lease | None, settings: Settings, *, now: datetime) -> str | None:
    """Why our taint must stay on a node judged recovering; None when the node itself is back for good:
    Ready for RECOVERY_SECONDS and a fresh Lease, both on the server's clock."""
    since = ready_since(node, lease)
    if node.ready == "True" and since is None:
        return "our out-of-service taint stays: the node's Lease gives no measure of its clock, so how long it " \
               "has been Ready cannot be timed on the server's clock"
    if since is None or age(now, since) < settings.recovery_seconds:
        return f"our out-of-service taint stays until the node is Ready for RECOVERY_SECONDS=" \
               f"{settings.recovery_seconds}"
    if not lease_fresh(lease, now):
        return "our out-of-service taint stays until the node's Lease is fresh"
    return None


def recovered_at(node: Node, lease: Lease | None, settings: Settings) -> datetime | None:
    """When recovered() stops asking for RECOVERY_SECONDS of Ready: None when that cannot be timed."""
    since = ready_since(node, lease)
    return since + timedelta(seconds=settings.recovery_seconds) if since is not None else None


def provenance_blocker(node: Node) -> str | None:
    """Why the out-of-service taint on this node is not ours to lift: no record of ours in RECOVERY_NAMESPACE
    says we added it, or the record is for another Node object (a machine registered since under the name).
    Nothing on the Node itself counts: its kubelet may write every annotation there."""
    record = node.taint_record
    if not record.node_uid:
        return "the out-of-service taint stays: no record of rwo-failover's in its namespace says rwo-failover " \
               "added it (a human's taint, or one rwo-failover 0.1 recorded in the Node's annotations, which the " \
               "node itself may write)"
    if record.node_uid != node.uid:
        return f"the out-of-service taint stays: rwo-failover added it for the Node object with uid " \
               f"{record.node_uid[:64]}, and this one has uid {node.uid[:64] or '(none)'}"
    return None


def reboot_blocker(node: Node, settings: Settings) -> str | None:
    """Why the machine is not proven power-cycled since we tainted it (planner/undo.py, the rule our
    NetworkFences follow too)."""
    record = node.taint_record
    confirm = f"kubectl -n {settings.recovery_namespace} annotate configmap {record.name} " \
              f"{POWER_CYCLED_ANNOTATION}=true"
    return machine_not_rebooted(node, record.boot_id, "our out-of-service taint", settings=settings,
                                bmc_off_at=record.bmc_off_at, acknowledged=record.acknowledged, confirm=confirm)


def lift_blocker(node: Node, lease: Lease | None, settings: Settings, *, now: datetime) -> tuple[str | None, bool]:
    """Why our taint stays on this node, and whether only a human can change that (not ours, or not rebooted);
    (None, False) when the node itself allows it off. The plan and the live re-check both judge by it."""
    why = provenance_blocker(node)
    if why:
        return why, True
    why = recovered(node, lease, settings, now=now)
    if why:
        return why, False
    why = reboot_blocker(node, settings)
    return why, why is not None


def undo_blocker(node: Node, snapshot: Snapshot, settings: Settings) -> tuple[str | None, bool]:
    """lift_blocker(), and nothing left from the outage: no pod on the node still terminating, and no
    VolumeAttachment on it. Removing the taint earlier races PodGC and the attach-detach controller
    (kubernetes#142331); medik8s waits for the same. No pod can have been scheduled there since (the taint is
    NoExecute), so an attachment on it is one the outage left."""
    reason, human = lift_blocker(node, snapshot.leases.get(node.name), settings, now=snapshot.now)
    if reason:
        return reason, human
    fence = snapshot.fences.get(node.name)
    if fence is not None and fence.ours:
        return "our out-of-service taint stays until the node is unfenced and its NetworkFence deleted", False
    terminating = sorted(p.key for p in snapshot.pods if p.node == node.name and p.deleting)
    if terminating:
        return f"our out-of-service taint stays while pods are still terminating: {', '.join(terminating)}", False
    attached = sorted(a.name for a in snapshot.attachments if a.node == node.name)
    if attached:
        return f"our out-of-service taint stays while VolumeAttachments are on the node: {', '.join(attached)}", \
            False
    return None, False


def untaint(verdicts: Sequence[NodeVerdict], snapshot: Snapshot, settings: Settings
            ) -> tuple[tuple[str, ...], tuple[TaintRecord, ...], tuple[tuple[str, str], ...], list[Skip]]:
    """Recovering nodes whose taint (ours) comes off now; our records that outlived their taint (a human removed
    it, or the Node object is gone), to drop; the nodes whose taint stays until a human acts,
    with why; and a skip for each recovering node that must wait."""
    nodes = snapshot.by_name
    ready, kept, skips = [], [], []
    for verdict in (v for v in verdicts if v.state is NodeState.RECOVERING):
        reason, human = undo_blocker(nodes[verdict.node], snapshot, settings)
        if reason:
            skips.append(Skip("node", verdict.node, reason))
            if human:
                kept.append((verdict.node, reason))
        else:
            ready.append(verdict.node)
    return tuple(ready), stale_records(snapshot), tuple(kept), skips


def machines_now(snapshot: Snapshot) -> tuple[TaintRecord, ...]:
    """Our records to write again because a node under our standing taint is down again: its kubelet went silent
    (Ready=Unknown, the node lifecycle controller's mark), and Kubernetes releases through the taint by itself
    (PodGC force-deletes its terminating pods, the attach-detach controller detaches), with or without a pass of
    ours. Each names the machine as the node last reported it, without an operator's word given before: undo then
    waits for a reboot after this outage, never only after the first. Ready=False is a kubelet that speaks (one
    starting after the power cycle posts its new bootID so), no new outage. Only the records whose machine or word
    changed, as read here (each write is preconditioned on its version)."""
    found = []
    for node in snapshot.nodes:
        record = node.taint_record
        if node.our_taint is None or not record.name or node.ready != "Unknown":
            continue
        boot = boot_id_note(node.boot_id)
        if record.boot_id != boot or record.acknowledged:
            found.append(replace(record, boot_id=boot, acknowledged=False))
    return tuple(sorted(found, key=lambda r: r.name))


def fences_now(snapshot: Snapshot) -> tuple[tuple[str, str, str], ...]:
    """(node, its bootID now, the fence's resourceVersion) for each NetworkFence of ours that still stands on a
    node down again (Ready=Unknown), recorded for another boot or with an operator's word given before: as our
    taint's record (machines_now), its machine is the node as it last reported itself."""
    found = []
    for node in snapshot.nodes:
        fence = snapshot.fences.get(node.name)
        if fence is None or not fence.ours or fence.machine is None or fence.state != "Fenced" or \
                node.ready != "Unknown" or fence.machine.uid != node.uid:
            continue
        boot = boot_id_note(node.boot_id)
        if fence.machine.boot_id != boot or fence.acknowledged:
            found.append((node.name, boot, fence.version))
    return tuple(sorted(found))


def stale_records(snapshot: Snapshot) -> tuple[TaintRecord, ...]:
    """Our taint records whose taint is gone: no node of that uid carries the taint with the recorded timeAdded.
    Act drops each only after reading its node again, live, and only the record as read here."""
    nodes = snapshot.by_name
    stale = []
    for name, record in sorted(snapshot.taint_records.items()):
        node = nodes.get(record.node)
        held = node is not None and node.uid == record.node_uid and name == record_name(node.uid) and \
            node.our_taint is not None
        if not held:
            stale.append(record)
    return tuple(stale)
