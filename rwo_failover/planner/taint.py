"""The out-of-service taint: when to add it, what blocks it, and when ours comes off."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Optional, Sequence

from ..model import Lease, Node, Pod, Snapshot
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


def undo_blocker(node: Node, snapshot: Snapshot, settings: Settings) -> Optional[str]:
    """recovered(), and nothing left from the outage: no pod on the node still terminating, and no
    VolumeAttachment there being deleted. Removing the taint earlier races PodGC and the attach-detach
    controller (kubernetes#142331); medik8s waits for the same."""
    reason = recovered(node, snapshot.leases.get(node.name), settings, snapshot.now)
    if reason:
        return reason
    fence = snapshot.fences.get(node.name)
    if fence is not None and fence.ours:
        return "our out-of-service taint stays until the node is unfenced and its NetworkFence deleted"
    terminating = sorted(p.key for p in snapshot.pods if p.node == node.name and p.deleting)
    if terminating:
        return f"our out-of-service taint stays while pods are still terminating: {', '.join(terminating)}"
    detaching = sorted(a.name for a in snapshot.attachments if a.node == node.name and a.deleting)
    if detaching:
        return f"our out-of-service taint stays while VolumeAttachments are being deleted: {', '.join(detaching)}"
    return None


def untaint(verdicts: Sequence[NodeVerdict], snapshot: Snapshot,
            settings: Settings) -> tuple[tuple[str, ...], tuple[str, ...], list[Skip]]:
    """Recovering nodes whose taint (ours) comes off now; nodes whose annotation outlived our taint (a human
    removed it) and is dropped; and a skip for each recovering node that must wait."""
    nodes = {n.name: n for n in snapshot.nodes}
    ready, skips = [], []
    for verdict in (v for v in verdicts if v.state is NodeState.RECOVERING):
        reason = undo_blocker(nodes[verdict.node], snapshot, settings)
        if reason:
            skips.append(Skip("node", verdict.node, reason))
        else:
            ready.append(verdict.node)
    stale = tuple(sorted(n.name for n in snapshot.nodes if n.oos_added_at and n.our_taint is None))
    return tuple(ready), stale, skips
