"""FENCING=redfish: a node whose kubelet went silent, judged before NotReady, and the brake on many at once.

A node's Lease unrenewed for REDFISH_SILENT_SECONDS on the API server's clock (well below the node-monitor
grace, above the kubelet's renew interval) makes it a candidate: "down" here means only that its BMC is to be
asked, and act touches nothing on it until the BMC answers PowerState Off (planner/fencing.py asks for that
step on every node in this mode). Silence alone is never proof: a partition or the API server's own trouble
silences Leases too, so the brake comes first: when more than MAX_UNHEALTHY_FRACTION of the nodes are silent
or not Ready, nothing is powered off and nothing is freed.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from datetime import datetime, timedelta

from ..model import Lease, Node, Snapshot
from ..settings import Settings
from .liveness import STAMP, age
from .types import NodeState, NodeVerdict, Refusal, RefusalKind

WITNESS = "no shutdown taint: its Lease went silent (FENCING=redfish)"


def last_heard(node: Node, lease: Lease | None) -> datetime | None:
    """The kubelet's last heartbeat, on the server's clock: its last Lease renewal, or a later status write while
    the node is Ready=True. The node lifecycle controller counts a status post as a heartbeat too, and keeps a
    node whose kubelet posts Ready but cannot renew its Lease Ready: its machine runs. Others write the status
    too (the attach-detach controller's volumesAttached), which can only make a node look alive longer, and only
    until the controller marks it Unknown. None when there is no server-stamped renewal to time silence by."""
    if lease is None or lease.changed_at is None:
        return None
    if node.ready == "True" and node.status_written_at is not None:
        return max(lease.changed_at, node.status_written_at)
    return lease.changed_at


def renews(lease: Lease) -> float:
    """Within its kubelet's renew interval (a quarter of the Lease's duration) and a 2 s slack a node is
    heartbeating, whatever REDFISH_SILENT_SECONDS says: a kubelet with a 120 s Lease renews every 30 s."""
    return lease.duration / 4 + 2


def judge_silent(node: Node, lease: Lease | None, settings: Settings, *, now: datetime,
                 seen: str | None = None, observed: float) -> NodeVerdict | None:
    """DOWN (a candidate for the BMC's word) once the kubelet has been silent REDFISH_SILENT_SECONDS; NOT_YET
    once it has missed a renewal; None while it heartbeats, so a healthy node costs no verdict. Silence is timed
    by the server's stamps and also by `observed`, how long this process itself has seen the Lease at its current
    version (observe/sightings.py): a renewal stamped by an API server whose clock is behind looks older than it
    is, and a kubelet renewing on time would otherwise look silent, and have its machine powered off."""
    def verdict(state: NodeState, reason: str, changes_at: datetime | None = None, *,
                pending: bool = False) -> NodeVerdict:
        return NodeVerdict(node.name, state, WITNESS, reason, "", changes_at, sighting_pending=pending)

    if seen is not None and (lease.version if lease else "") != seen:
        return verdict(NodeState.NOT_YET, "its Lease changed while this pass watched it")
    heard = last_heard(node, lease)
    if heard is None:
        return None
    if heard > now + STAMP:
        return verdict(NodeState.NOT_YET, f"its last heartbeat is stamped {age(heard, now):.0f}s later than the "
                                          "API server's now: two clocks disagree, so it is judged neither way")
    assert lease is not None
    silent, needed = age(now, heard + STAMP), max(settings.redfish_silent_seconds, renews(lease))
    if silent >= needed and observed < renews(lease):
        # Asking the BMC is a read, and its Off is proof whatever our clocks say; a power-off is not: a live
        # kubelet would have renewed while we watched a renewal interval, so none is sent before that.
        return verdict(NodeState.DOWN, f"Lease unrenewed for {silent:.0f}s by the server's stamps, seen unchanged "
                                       f"here for {observed:.1f}s: down only once its BMC answers PowerState Off, "
                                       f"and powered off only once seen unchanged here for {renews(lease):g}s (a "
                                       "renewal interval)", now + timedelta(seconds=renews(lease) - observed),
                       pending=True)
    if silent >= needed:
        return verdict(NodeState.DOWN, f"Lease unrenewed for {silent:.0f}s (REDFISH_SILENT_SECONDS="
                                       f"{settings.redfish_silent_seconds}, renewals due every "
                                       f"{lease.duration / 4:g}s); down only once its BMC answers PowerState Off")
    if silent < renews(lease):
        return None
    return verdict(NodeState.NOT_YET, f"Lease unrenewed for {silent:.0f}s (needs {needed:g}s, "
                                      "REDFISH_SILENT_SECONDS)", heard + STAMP + timedelta(seconds=needed))


def quiet(node: Node, lease: Lease | None, settings: Settings, *, now: datetime) -> bool:
    """Not Ready, or silent for REDFISH_SILENT_SECONDS, or untimeable: what the brake counts."""
    heard = last_heard(node, lease)
    if node.ready != "True" or heard is None or lease is None:
        return True
    return age(now, heard + STAMP) >= max(settings.redfish_silent_seconds, renews(lease))  # as judge_silent


def silent_brake(snapshot: Snapshot, settings: Settings, idle: AbstractSet[str] = frozenset()) -> Refusal | None:
    """Too many nodes silent or not Ready at once: a partition, or the API server's own trouble, silences
    Leases as a power cut does. Then no BMC is told to power anything off and nothing is freed. `idle` nodes
    (proven down with nothing to release; never a merely silent one) count neither way, as in the
    unhealthy-fraction brake."""
    if settings.fencing != "redfish":
        return None
    counted = [n for n in snapshot.nodes if n.name not in idle]
    silent = sum(1 for n in counted if quiet(n, snapshot.leases.get(n.name), settings, now=snapshot.now))
    if counted and silent / len(counted) > settings.max_unhealthy_fraction:
        return Refusal(RefusalKind.UNHEALTHY_FRACTION,
                       f"brake: {silent} of {len(counted)} nodes are not Ready or their Lease has been silent for "
                       f"REDFISH_SILENT_SECONDS={settings.redfish_silent_seconds}, more than MAX_UNHEALTHY_FRACTION="
                       f"{settings.max_unhealthy_fraction:g}; the control plane may be partitioned: no BMC is "
                       "asked to power anything off, and nothing is freed")
    return None
