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
Split-brain needs positive evidence of life: Ready=True; the Lease changed while this pass watched it; or,
still within the Lease's duration, a renewal after the node went Ready=Unknown, or a renewal after the node's
taints were last written (the kubelet heartbeats while tainted for shutdown). A Lease renewed before both is
"not yet", however fresh it looks: the normal start of an outage when the node-monitor grace is shorter than
the Lease, or a Ready=False node that loses power. Which of a live kubelet's own heartbeats (its Lease, its
Ready=False posts) came last never decides: the verdict is the same on every pass while nothing changes. So is
a kubelet's graceful shutdown ("node is shutting down"), which renews its Lease for its grace period as told.
A server stamp later than the server's own now means two clocks disagree (API servers apart, a clock stepped
back): that node is judged neither way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime, timedelta

from ..model import BadObject, Lease, Node, parse_time
from .types import NodeState, NodeVerdict

# managedFields times are whole seconds, truncated: a change stamped t happened in [t, t + 1 s). Ages of
# silence are counted from t + 1 s, so they come out short, never long.
STAMP = timedelta(seconds=1)


def age(now: datetime, then: datetime) -> float:
    return (now - then).total_seconds()


def lease_fresh(lease: Lease | None, now: datetime) -> bool:
    """Changed within its own duration by the server's clock: the kubelet is heartbeating."""
    return lease is not None and lease.changed_at is not None and age(now, lease.changed_at) < lease.duration


def lease_expires_at(lease: Lease | None) -> datetime | None:
    """When a fresh Lease stops being fresh, unless it changes again."""
    if lease is None or lease.changed_at is None:
        return None
    return lease.changed_at + timedelta(seconds=lease.duration)


def ready_since(node: Node, lease: Lease | None) -> datetime | None:
    """When a Ready node became Ready, on the server's clock: the kubelet's transition time, moved by the skew
    its Lease shows, and a second later for the truncated stamp; never before our own out-of-service taint
    (the node was down then), which bounds a skew measured on another write than the Ready post (a kubelet
    clock stepped in between). None when the skew cannot be measured."""
    skew = lease.kubelet_skew if lease is not None else None
    if node.ready != "True" or node.ready_since is None or skew is None:
        return None
    since = node.ready_since - timedelta(seconds=skew) + STAMP
    try:
        ours = parse_time(node.oos_added_at) if node.oos_added_at else None
    except BadObject:
        ours = None
    return max(since, ours) if ours is not None else since


def _since(node: Node) -> str:
    written = node.status_written_at
    return written.strftime("%Y-%m-%dT%H:%M:%SZ") if written and node.ready != "True" else ""


def judge_liveness(node: Node, lease: Lease | None, taint: str, *, min_seconds: int, now: datetime,
                   seen: str | None = None, status_seen: datetime | None = None,
                   observed: float = 0.0) -> NodeVerdict:
    """Down, not yet, or split-brain; signs of life are checked first, and win.

    `observed` is how long this process itself has seen the node's current Ready=Unknown, on its own monotonic
    clock (observe/sightings.py): the NotReady wait holds on it too, so no skew between the API server that
    stamped the verdict and the one answering now can shorten the wait.

    `seen` is the Lease's resourceVersion when this pass first read it ("" when it had none): given, a Lease
    that has changed since is a renewal this pass watched happen. `status_seen` is the node's status stamp
    the plan saw: a re-check keeps it while Ready stays Unknown, so another status writer in between (the
    attach-detach controller's volumesAttached) does not restart the NotReady wait mid-failover.
    """
    if status_seen is not None and node.ready == "Unknown" and node.status_written_at is not None:
        node = dataclasses.replace(node, status_written_at=min(node.status_written_at, status_seen))

    def verdict(state: NodeState, reason: str, changes_at: datetime | None = None, *,
                unjudged: str = "", sighting_pending: bool = False) -> NodeVerdict:
        return NodeVerdict(node.name, state, taint, reason, _since(node), changes_at, unjudged, sighting_pending)

    alive = _alive(node, lease, now, seen=seen)
    if alive is not None:
        return verdict(NodeState.SPLIT_BRAIN, f"tainted for shutdown but still heartbeating: {alive[0]}", alive[1])
    blind, clears_at = _unjudgeable(node, lease, now)
    if blind:
        # A stamp ahead of the server's now stops being ahead as time passes: from then on the node is judged
        # like any other, so the verdict changes when that judgment first differs from "not yet".
        later = None if clears_at is None else judge_liveness(node, lease, taint, min_seconds=min_seconds,
                                                              now=clears_at, seen=seen,
                                                              observed=observed + age(clears_at, now))
        changes = None if later is None else (clears_at if later.state is not NodeState.NOT_YET else later.changes_at)
        return verdict(NodeState.NOT_YET, blind, changes, unjudged=blind)
    if node.shutting_down:
        return verdict(NodeState.NOT_YET, "the kubelet reports a graceful shutdown in progress (\"node is shutting "
                                          "down\"); down once the node lifecycle controller finds it silent")
    if node.ready != "Unknown":
        return verdict(NodeState.NOT_YET, f"Ready={node.ready or 'absent'}: reported by the kubelet, which was "
                                          "alive to post it; down needs the node lifecycle controller's "
                                          "Ready=Unknown")
    return _down_or_not_yet(node, lease, min_seconds, now=now, verdict=verdict, observed=observed)


def _unjudgeable(node: Node, lease: Lease | None, now: datetime) -> tuple[str, datetime | None]:
    """Why the node cannot be judged on the server's clock at all ("" when it can), and when time alone ends
    that (None: never). Only a node that is not Ready is ever judged, so only its stamps matter."""
    if node.ready == "Unknown" and node.status_written_at is None:
        return "cannot time NotReady on the server's clock: the node's status carries no managedFields time", None
    if lease is not None and lease.changed_at is None:
        return "cannot time the Lease's last renewal on the server's clock: it carries no managedFields time", None
    stamps = {"the node's status": node.status_written_at, "its Lease": lease.changed_at if lease else None}
    ahead = {what: stamp for what, stamp in stamps.items() if stamp is not None and stamp > now + STAMP}
    if not ahead:
        return "", None
    what, stamp = max(ahead.items(), key=lambda item: item[1])
    return (f"{what} is stamped {age(stamp, now):.0f}s later than the API server's now: two clocks disagree (API "
            "servers apart, or a clock stepped back), so it is judged neither way"), stamp - STAMP


def _alive(node: Node, lease: Lease | None, now: datetime, *,
           seen: str | None) -> tuple[str, datetime | None] | None:
    """Positive evidence of life, and when it lapses by time alone; None without any.

    Each piece of evidence is a write by the kubelet that the server stamped after something that a dead
    kubelet could not have followed, so the verdict stays the same on every pass while nothing changes."""
    if node.ready == "True":
        return "Ready=True", None
    if seen is not None and (lease.version if lease else "") != seen:
        return "its Lease changed while this pass watched it", None
    renewed = lease.changed_at if lease is not None else None
    if lease is None or renewed is None or node.shutting_down or renewed > now + STAMP or not lease_fresh(lease, now):
        return None
    went, tainted = node.status_written_at, node.spec_written_at
    # Ready=Unknown is the node lifecycle controller's write: a renewal after it is the kubelet back. Ready=False
    # is the kubelet's own post, and it keeps posting it: which of its two heartbeats came last says nothing.
    if node.ready == "Unknown" and went is not None and renewed > went:
        return (f"Lease renewed {age(now, renewed):.0f}s ago, after the node went NotReady, within its "
                f"{lease.duration}s duration"), lease_expires_at(lease)
    # The node's taints are written to the node itself; a renewal stamped a whole second after that write came
    # after the shutdown taint: a dead kubelet renews nothing. (Its own last renewal precedes a cloud's
    # shutdown taint, which comes once the instance has stopped, and a human's, added once it is off.)
    if tainted is not None and renewed >= tainted + STAMP:
        return (f"Lease renewed {age(now, renewed):.0f}s ago, after the node's taints were last written, within "
                f"its {lease.duration}s duration"), lease_expires_at(lease)
    return None


def _down_or_not_yet(node: Node, lease: Lease | None, min_seconds: int, *, now: datetime,
                     verdict: Callable[..., NodeVerdict], observed: float) -> NodeVerdict:
    assert node.status_written_at is not None
    not_ready = node.status_written_at + STAMP
    silent = lease.changed_at + STAMP if lease is not None and lease.changed_at is not None else None
    needed = max(min_seconds, lease.duration) if lease is not None else 0
    stamped = max(not_ready + timedelta(seconds=min_seconds),
                  silent + timedelta(seconds=needed) if silent else not_ready)
    due = max(stamped, now + timedelta(seconds=max(0.0, min_seconds - observed)))
    quiet = f"Lease unrenewed for {age(now, silent):.0f}s" if silent else "no Lease"
    if now < due:
        return verdict(NodeState.NOT_YET, f"Ready=Unknown for {max(0.0, age(now, not_ready)):.0f}s (needs "
                                          f"{min_seconds}s, and as long seen here: {observed:.1f}s), {quiet} (needs "
                                          f"{needed}s)", due, sighting_pending=stamped <= now)
    return verdict(NodeState.DOWN, f"Ready=Unknown for {age(now, not_ready):.0f}s ({observed:.0f}s seen here), "
                                   f"{quiet}")
