"""What the pass could not read, and what that withholds: a node with something unreadable on it is not
acted on."""

from __future__ import annotations

from ..model import Snapshot


def unreadable_on(node: str, snapshot: Snapshot) -> str | None:
    """Why this node cannot be acted on because something on it could not be read: a pod on it, or a claim or
    PV of one. What we cannot read we cannot protect: the out-of-service taint would evict that pod, and an
    attachment it may use could be pulled from under it."""
    unread = {(u.kind, u.name) for u in snapshot.unreadable}
    for pod in (p for p in snapshot.pods if p.node == node):
        for claim_name in pod.claims:
            claim = snapshot.claims.get(f"{pod.namespace}/{claim_name}")
            if ("persistentvolumeclaim", f"{pod.namespace}/{claim_name}") in unread or (
                    claim is not None and ("persistentvolume", claim.volume) in unread):
                return f"nothing on node {node} is touched: a claim or volume of pod {pod.key} cannot be read"
    found = next((u for u in snapshot.unreadable if u.kind == "pod" and u.node == node), None)
    return f"nothing on node {node} is touched: pod {found.name} on it cannot be read" if found else None
