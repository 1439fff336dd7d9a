"""The out-of-service taint: when to add it, what blocks it, and when ours comes off."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Optional, Sequence

from ..model import APPLIED_BY, Lease, Node, Pod, Snapshot, boot_id_note
from ..settings import Settings
from .liveness import age, lease_fresh, ready_since
from .pods import protection
from .types import NodeState, NodeVerdict, Skip

OUT_OF_SERVICE_SINCE = (1, 28)  # the out-of-service taint's force-detach is GA from Kubernetes 1.28


def wants_out_of_service(snapshot: Snapshot, settings: Settings) -> bool:
    if settings.out_of_service_taint == "auto":
        return snapshot.server_version is not None and snapshot.server_version >= OUT_OF_SERVICE_SINCE
    return settings.out_of_service_taint == "always"


def taint_blocker(pods: Sequence[Pod], snapshot: Snapshot, settings: Settings) -> Optional[str]:
    """Why the out-of-service taint must not go on: Kubernetes would then delete *every* pod on the node,
    including one that a setting protects from us. Such a node gets the direct path only."""
    for pod in pods:
        reason = protection(pod, snapshot, settings)
        if reason:
            return (f"out-of-service taint not added: {pod.key} is protected ({reason}), and the taint would "
                    "let Kubernetes delete it; using direct deletes only")
    return None


def recovered(node: Node, lease: Optional[Lease], settings: Settings, now: datetime) -> Optional[str]:
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


def recovered_at(node: Node, lease: Optional[Lease], settings: Settings) -> Optional[datetime]:
    """When recovered() stops asking for RECOVERY_SECONDS of Ready: None when that cannot be timed."""
    since = ready_since(node, lease)
    return since + timedelta(seconds=settings.recovery_seconds) if since is not None else None


def provenance_blocker(node: Node) -> Optional[str]:
    """Why the out-of-service taint on this node is not ours to lift: nothing says rwo-failover added it, or
    it was added for another Node object (a machine registered since under the same name)."""
    record = node.taint_record
    if record.applied_by != APPLIED_BY:
        return "the out-of-service taint stays: no rwo-failover.io/out-of-service-applied-by annotation says " \
               "rwo-failover added it (a human's taint, or one added by a version that did not record it)"
    if record.node_uid != node.uid:
        return f"the out-of-service taint stays: rwo-failover added it for the Node object with uid " \
               f"{record.node_uid or '(none recorded)'}, and this one has uid {node.uid or '(none)'}"
    return None


def reboot_blocker(node: Node) -> Optional[str]:
    """Why the node is not proven power-cycled since we tainted it: the kubelet's bootID is new at every boot,
    and the same bootID means the machine only got its network back, still running what the taint released
    (Rook's guidance: never remove the taint before a full power cycle)."""
    recorded = node.taint_record.boot_id
    if not recorded or not node.boot_id:
        return "our out-of-service taint stays: no bootID " + ("was recorded when it was added" if not recorded
                                                                else "is reported by the node now") + \
               ", so a reboot since cannot be proven"
    if recorded in (node.boot_id, boot_id_note(node.boot_id)):  # recorded as written, or by its digest
        return f"our out-of-service taint stays: the node came back without rebooting (bootID {recorded[:80]} is " \
               "the one recorded when rwo-failover added the taint), so it may still run what the taint released"
    return None


def lift_blocker(node: Node, lease: Optional[Lease], settings: Settings, now: datetime) -> tuple[Optional[str], bool]:
    """Why our taint stays on this node, and whether only a human can change that (not ours, or not rebooted);
    (None, False) when the node itself allows it off. The plan and the live re-check both judge by it."""
    why = provenance_blocker(node)
    if why:
        return why, True
    why = recovered(node, lease, settings, now)
    if why:
        return why, False
    why = reboot_blocker(node)
    return why, why is not None


def undo_blocker(node: Node, snapshot: Snapshot, settings: Settings) -> tuple[Optional[str], bool]:
    """lift_blocker(), and nothing left from the outage: no pod on the node still terminating, and no
    VolumeAttachment on it. Removing the taint earlier races PodGC and the attach-detach controller
    (kubernetes#142331); medik8s waits for the same. No pod can have been scheduled there since (the taint is
    NoExecute), so an attachment on it is one the outage left."""
    reason, human = lift_blocker(node, snapshot.leases.get(node.name), settings, snapshot.now)
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
            ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[str, str], ...], list[Skip]]:
    """Recovering nodes whose taint (ours) comes off now; nodes whose annotation outlived our taint (a human
    removed it) and is dropped; the nodes whose taint stays until a human acts, with why; and a skip for each
    recovering node that must wait."""
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
    stale = tuple(sorted(n.name for n in snapshot.marked if n.oos_added_at and n.our_taint is None))
    return tuple(ready), stale, tuple(kept), skips
