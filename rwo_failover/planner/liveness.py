"""Liveness by observed change, on one clock: down, not yet, or split-brain.

The node lifecycle controller judges a node by whether its Lease and status *change*, timed on its own
clock; it never subtracts a node's timestamp from its own. So does this module, on the API server's clock:
`now` comes from the server's Date header, and when the node's status and its Lease last changed comes from
the managedFields times the server stamps on every write that changes them. A node's own timestamps
(renewTime, the kubelet's condition times) decide nothing here; they are read only to measure the kubelet's
clock skew on one write (model.Lease.kubelet_skew), which places its Ready=True transition on the server's
clock for undo.

Down needs all of:
- Ready=Unknown: the node lifecycle controller found the kubelet silent (neither Lease nor status changed)
  for its whole grace period. Ready=False is the kubelet's own report: it was alive to post it.
- the status write that made it Unknown at least `min_seconds` ago;
- the Lease unchanged for at least the longer of `min_seconds` and its duration (the kubelet renews it every
  quarter of that), and unchanged while this pass watched it.
Split-brain needs positive evidence of life: Ready=True; the Lease changed while this pass watched it; or a
renewal after the node went NotReady that is still within the Lease's duration. A Lease renewed before
NotReady is "not yet", however fresh it looks: the normal start of an outage when the node-monitor grace is
shorter than the Lease.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Callable, Optional

from ..model import Lease, Node
from .types import NodeState, NodeVerdict

# managedFields times are whole seconds, truncated: a change stamped t happened in [t, t + 1 s). Ages of
# silence are counted from t + 1 s, so they come out short, never long.
STAMP = timedelta(seconds=1)


def age(now: datetime, then: datetime) -> float:
    return (now - then).total_seconds()


def lease_fresh(lease: Optional[Lease], now: datetime) -> bool:
    """Changed within its own duration by the server's clock: the kubelet is heartbeating."""
    return lease is not None and lease.changed_at is not None and age(now, lease.changed_at) < lease.duration


def lease_expires_at(lease: Optional[Lease]) -> Optional[datetime]:
    """When a fresh Lease stops being fresh, unless it changes again."""
    if lease is None or lease.changed_at is None:
        return None
    return lease.changed_at + timedelta(seconds=lease.duration)


def ready_since(node: Node, lease: Optional[Lease]) -> Optional[datetime]:
    """When a Ready node became Ready, on the server's clock: the kubelet's transition time, moved by the skew
    its Lease shows, and a second later for the truncated stamp. None when the skew cannot be measured."""
    skew = lease.kubelet_skew if lease is not None else None
    if node.ready != "True" or node.ready_since is None or skew is None:
        return None
    return node.ready_since - timedelta(seconds=skew) + STAMP


def _since(node: Node) -> str:
    written = node.status_written_at
    return written.strftime("%Y-%m-%dT%H:%M:%SZ") if written and node.ready != "True" else ""


def judge_liveness(node: Node, lease: Optional[Lease], taint: str, min_seconds: int, now: datetime,
                   seen: Optional[str] = None) -> NodeVerdict:
    """Down, not yet, or split-brain; signs of life are checked first, and win.

    `seen` is the Lease's resourceVersion when this pass first read it ("" when it had none): given, a Lease
    that has changed since is a renewal this pass watched happen.
    """
    def verdict(state: NodeState, reason: str, changes_at: Optional[datetime] = None) -> NodeVerdict:
        return NodeVerdict(node.name, state, taint, reason, _since(node), changes_at)

    alive = _alive(node, lease, now, seen)
    if alive is not None:
        return verdict(NodeState.SPLIT_BRAIN, f"tainted for shutdown but still heartbeating: {alive[0]}", alive[1])
    if node.ready != "Unknown":
        return verdict(NodeState.NOT_YET, f"Ready={node.ready or 'absent'}: reported by the kubelet, which was "
                                          "alive to post it; down needs the node lifecycle controller's "
                                          "Ready=Unknown")
    if node.status_written_at is None:
        return verdict(NodeState.NOT_YET, "cannot time NotReady on the server's clock: the node's status carries "
                                          "no managedFields time")
    if lease is not None and lease.changed_at is None:
        return verdict(NodeState.NOT_YET, "cannot time the Lease's last renewal on the server's clock: it carries "
                                          "no managedFields time")
    return _down_or_not_yet(node, lease, min_seconds, now, verdict)


def _alive(node: Node, lease: Optional[Lease], now: datetime,
           seen: Optional[str]) -> Optional[tuple[str, Optional[datetime]]]:
    """Positive evidence of life, and when it lapses by time alone; None without any."""
    if node.ready == "True":
        return "Ready=True", None
    if seen is not None and (lease.version if lease else "") != seen:
        return "its Lease changed while this pass watched it", None
    went, renewed = node.status_written_at, lease.changed_at if lease is not None else None
    if lease is not None and renewed is not None and went is not None and renewed > went \
            and lease_fresh(lease, now):
        return (f"Lease renewed {age(now, renewed):.0f}s ago, after the node went NotReady, within its "
                f"{lease.duration}s duration"), lease_expires_at(lease)
    return None


def _down_or_not_yet(node: Node, lease: Optional[Lease], min_seconds: int, now: datetime,
                     verdict: Callable[..., NodeVerdict]) -> NodeVerdict:
    assert node.status_written_at is not None
    not_ready = node.status_written_at + STAMP
    silent = lease.changed_at + STAMP if lease is not None and lease.changed_at is not None else None
    needed = max(min_seconds, lease.duration) if lease is not None else 0
    due = max(not_ready + timedelta(seconds=min_seconds),
              silent + timedelta(seconds=needed) if silent else not_ready)
    quiet = f"Lease unrenewed for {age(now, silent):.0f}s" if silent else "no Lease"
    if now < due:
        return verdict(NodeState.NOT_YET, f"Ready=Unknown for {max(0.0, age(now, not_ready)):.0f}s (needs "
                                          f"{min_seconds}s), {quiet} (needs {needed}s)", due)
    return verdict(NodeState.DOWN, f"Ready=Unknown for {age(now, not_ready):.0f}s, {quiet}")
