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
"""

from __future__ import annotations

from typing import Iterable, Sequence

from ..model import Claim, Pod, Snapshot
from .types import NodePlan

LISTED_CHARS = 600  # the Warning names objects up to about this many characters, then counts the rest


def unproven(node: str, selected: Sequence[tuple[Pod, list[Claim]]], snapshot: Snapshot) -> tuple[str, ...]:
    """The selected pods none of whose exclusive volumes is attached to `node`: spec.nodeName, which their
    tenant wrote, is all that ties them to it."""
    attached = {a.volume for a in snapshot.attachments if a.node == node and a.volume}
    return tuple(pod.key for pod, claims in selected if not any(c.volume in attached for c in claims))


def left_out(node_plans: Iterable[NodePlan], snapshot: Snapshot) -> frozenset[str]:
    """The proven-down nodes the unhealthy fraction leaves out: those with nothing counted to release. One
    blocked by something unreadable on it stays in only when a VolumeAttachment names it (what is unreadable
    there is a tenant's pod or claim, or a PV; only an attachment says a volume is really there)."""
    attached = {a.node for a in snapshot.attachments}
    return frozenset(n.verdict.node for n in node_plans
                     if not n.counted and not (n.blocked and n.verdict.node in attached))


def ignored(node_plans: Sequence[NodePlan], left: frozenset[str]) -> tuple[tuple[str, str], ...]:
    """What the brakes ignored, for the Warning, as (node, what): each pod on a node they left out, and each
    blocked node they left out, with what blocks it."""
    pods = [(n.verdict.node, f"pod {key} on node {n.verdict.node}") for n in node_plans
            if n.has_work and not n.counted for key in n.unproven]
    return tuple(pods + [(n.verdict.node, f"node {n.verdict.node} ({n.blocked})") for n in node_plans
                         if n.blocked and n.verdict.node in left])


def bounded_list(items: Sequence[str], limit: int = LISTED_CHARS) -> str:
    """`items` joined, up to about `limit` characters, then how many more: a message never grows with them."""
    shown: list[str] = []
    for item in items:
        if shown and sum(len(s) + 2 for s in shown) + len(item) > limit:
            break
        shown.append(item[:limit])
    rest = len(items) - len(shown)
    return ", ".join(shown) + (f" and {rest} more" if rest else "")
