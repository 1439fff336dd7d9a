"""Which proven-down nodes the brakes count: only by evidence no tenant can write.

Any tenant may create a pod naming any registered node in spec.nodeName, mount its own bound RWO claim and
delete the pod; on a stopped node no kubelet ever confirms the delete, so it stays Terminating for good. Such a
pod names the node: it proves nothing about it. Counted, five of them next to a real outage tripped
MAX_NODES_PER_PASS on every pass, and on stopped nodes in the majority the unhealthy fraction did the same
(issue 26). What a tenant cannot write: the node's own state and its Lease (which proved it down), and the
VolumeAttachments on it (the attach-detach controller's, cluster-scoped). So a node counts toward the brakes
when it has an attachment to release, or a pod to free whose exclusive volume is attached there; or, when
something on it cannot be read, when a VolumeAttachment names it. Its other work is still done (the node is
proven down all the same): it only does not move the brakes, and one Warning per pass names what was left out.

But the attach-detach controller attaches a scheduled pod's volumes whatever its node's state: a tenant pod
bound to a stopped node, tolerating every taint, gets its own claim attached there within a second (measured
on kube v1.36.2). So evidence counts only when it predates the node's death: a VolumeAttachment whose
creationTimestamp (the API server's stamp) is before the node's last sign of life on the same clock, or a pod
the node's own kubelet ran (status.startTime set). A tenant writes no pod status (a create resets it; the
NodeRestriction admission lets a kubelet write only its own node's pods), and a dead kubelet writes nothing,
so that pod was running there while the node was alive; it also counts a pod on a volume that is never
attached (NFS, attachRequired: false), which the attachment rule alone left out of every brake. Not a pod's
managedFields: a tenant writes those itself, times included (on v1.36.2 a create kept a forged `kubelet`
`status` entry dated 2020).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from ..model import Attachment, Claim, Node, Pod, Snapshot
from .types import NodePlan


def last_alive(node: Node, snapshot: Snapshot) -> datetime | None:
    """The node's last sign of life on the server's clock: its Lease's last renewal (only its kubelet renews
    it); without a Lease stamp, the status write that found it NotReady. None: it cannot be placed."""
    lease = snapshot.leases.get(node.name)
    if lease is not None and lease.changed_at is not None:
        return lease.changed_at
    return node.status_written_at if node.ready != "True" else None


def _before(moment: datetime | None, alive: datetime | None) -> bool:
    # Stamps are whole seconds: one in the same second as the last sign of life may come after it, so it is
    # not counted (a tenant's comes long after; a real attachment, long before).
    return moment is not None and alive is not None and moment < alive


def witnessed(node: Node, snapshot: Snapshot) -> list[Attachment]:
    """The VolumeAttachments on `node` made while it was alive: what the brakes count."""
    alive = last_alive(node, snapshot)
    return [a for a in snapshot.attachments if a.node == node.name and _before(a.created_at, alive)]


def unproven(node: Node, selected: Sequence[tuple[Pod, list[Claim]]], snapshot: Snapshot) -> tuple[str, ...]:
    """The selected pods tied to `node` only by what their tenant wrote: no exclusive volume of theirs attached
    there while it was alive, and never run by its kubelet."""
    attached = {a.volume for a in witnessed(node, snapshot) if a.volume}
    return tuple(pod.key for pod, claims in selected
                 if not any(c.volume in attached for c in claims) and pod.started_at is None)


def unproven_attachments(node: Node, names: Iterable[str], snapshot: Snapshot) -> tuple[str, ...]:
    """Of the attachments to release on `node`, those made after it died: a tenant's pod can have the
    attach-detach controller make them. Still released when the rules say so, never counted."""
    counted = {a.name for a in witnessed(node, snapshot)}
    return tuple(name for name in names if name not in counted)


def left_out(node_plans: Iterable[NodePlan], snapshot: Snapshot) -> frozenset[str]:
    """The proven-down nodes the unhealthy fraction leaves out: those with nothing counted to release. One
    blocked by something unreadable on it stays in only when a VolumeAttachment made while it was alive names
    it (what is unreadable there is a tenant's pod or claim, or a PV; only such an attachment says a volume is
    really there)."""
    nodes = snapshot.by_name
    return frozenset(n.verdict.node for n in node_plans
                     if not n.counted and not (n.blocked and n.verdict.node in nodes
                                               and witnessed(nodes[n.verdict.node], snapshot)))


def ignored(node_plans: Sequence[NodePlan], left: frozenset[str]) -> tuple[tuple[str, str], ...]:
    """What the brakes ignored, for the Warning, as (node, what): each pod and attachment on a node they left
    out, and each blocked node they left out, with what blocks it."""
    found = []
    for n in node_plans:
        node = n.verdict.node
        if n.has_work and not n.counted:
            found += [(node, f"pod {key} on node {node}") for key in n.unproven]
            found += [(node, f"volumeattachment {name} on node {node} (made after it went down)")
                      for name in n.unproven_attachments]
    return tuple(found + [(n.verdict.node, f"node {n.verdict.node} ({n.blocked})") for n in node_plans
                          if n.blocked and n.verdict.node in left])
