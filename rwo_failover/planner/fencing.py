"""Fencing: which proven-down nodes must be fenced before anything on them is touched, and when to unfence.

With FENCING set, a node with work is acted on only once fencing is confirmed: a NetworkFence of ours that
answered Succeeded, or (webhook) an answer of {"fenced": true} in this pass. Until then nothing on it is
touched: no pod, no attachment, no taint. Unfencing comes first when the node is back: set Unfenced, wait
for Succeeded, delete the object; only then may our out-of-service taint come off.
"""

from __future__ import annotations

from typing import Optional

from ..config import Settings
from ..model import Snapshot
from .nodes import shutdown_taint
from .taint import recovered
from .types import Skip

REQUEST = "request"  # create the fence, or call the webhook
REFENCE = "refence"  # our fence is Unfenced (an earlier recovery) and the node is down again: set it Fenced
PENDING = "pending"  # asked; no answer yet: the next pass looks again
UNFENCE = "unfence"  # the node is back: ask for Unfenced
DELETE = "delete"    # Unfenced and Succeeded: remove the object


def fence_step(node: str, snapshot: Snapshot, settings: Settings) -> tuple[Optional[str], str]:
    """For a proven-down node with work: the fencing step still needed (None: fenced, go on), and why."""
    if settings.fencing == "none":
        return None, ""
    if settings.fencing == "webhook":
        return REQUEST, "the fence webhook must answer fenced before anything is touched"
    fence = snapshot.fences.get(node)
    if fence is None:
        return REQUEST, "no NetworkFence yet"
    if not fence.ours:
        return "failed", f"NetworkFence {node} exists and was not created by rwo-failover; not touching it"
    if fence.state != "Fenced":
        return REFENCE, "our NetworkFence is Unfenced, and the node is down again"
    if fence.result == "Succeeded":
        return None, "fenced"
    if fence.result == "Failed":
        return "failed", f"NetworkFence {node} answered Failed: {fence.message or 'no message'}"
    return PENDING, f"NetworkFence {node} has not answered yet"


def unfence_steps(snapshot: Snapshot, settings: Settings) -> tuple[tuple[tuple[str, str], ...], list[Skip]]:
    """(node, UNFENCE or DELETE) for each NetworkFence of ours whose node is back for good; skips for the rest."""
    if settings.fencing != "networkfence":
        return (), []
    nodes = {n.name: n for n in snapshot.nodes}
    steps, skips = [], []
    for name, fence in sorted(snapshot.fences.items()):
        node = nodes.get(name)
        if not fence.ours:
            continue
        if node is None:
            skips.append(Skip("networkfence", name, "its node is gone; the fence stays until a human removes it"))
            continue
        reason = recovered(node, snapshot.leases.get(name), settings, snapshot.now)
        if reason is None and shutdown_taint(node, settings.shutdown_taints):
            reason = "the node still carries a shutdown taint"
        if reason:
            if fence.state == "Unfenced" or node.ready == "True":
                skips.append(Skip("networkfence", name, f"stays fenced: {reason}"))
            continue
        if fence.state == "Fenced":
            steps.append((name, UNFENCE))
        elif fence.result == "Succeeded":
            steps.append((name, DELETE))
        elif fence.result == "Failed":
            skips.append(Skip("networkfence", name, f"unfencing answered Failed: {fence.message or 'no message'}"))
        else:
            skips.append(Skip("networkfence", name, "unfencing asked; no answer yet"))
    return tuple(steps), skips
