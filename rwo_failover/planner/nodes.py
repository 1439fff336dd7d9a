"""Which nodes are judged, with which wait, and the node brakes; liveness itself is liveness.py."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from datetime import datetime

from ..model import DEFAULT_LEASE_SECONDS, Lease, Node, Snapshot
from ..model.matchers import TaintSpec, any_taint_matches
from ..model.names import NODE_OPT_OUT_LABEL
from ..settings import Settings
from .liveness import judge_liveness
from .redfish import WITNESS, judge_silent
from .types import NodePlan, NodeState, NodeVerdict, Refusal, RefusalKind, Skip


def shutdown_taint(node: Node, specs: Sequence[TaintSpec]) -> TaintSpec | None:
    """The first spec matching one of the node's taints; our own out-of-service taint never counts."""
    if not node.taints:  # most nodes, in every pass, several times: continuous mode's idle passes judge them all
        return None
    ours = node.our_taint
    return any_taint_matches(specs, [t.as_dict() for t in node.taints if t is not ours])


def min_not_ready(settings: Settings, lease: Lease | None) -> int:
    """The NotReady time that makes a node down: MIN_NOT_READY_SECONDS; with fencing (whose confirmation is then
    required before acting) FENCED_MIN_NOT_READY_SECONDS (by default the node's own Lease duration) when that
    is shorter. Fencing may make failover faster, never slower."""
    if settings.fencing == "none":
        return settings.min_not_ready_seconds
    fenced = settings.fenced_min_not_ready_seconds
    if fenced is None:
        fenced = lease.duration if lease is not None else DEFAULT_LEASE_SECONDS
    return min(settings.min_not_ready_seconds, fenced)


def judge_tainted_node(node: Node, lease: Lease | None, taint: TaintSpec, *, settings: Settings, now: datetime,
                       seen: str | None = None, status_seen: datetime | None = None,
                       observed: float = 0.0) -> NodeVerdict:
    """judge_liveness of a node with a shutdown taint (never our own, see shutdown_taint)."""
    return judge_liveness(node, lease, str(taint), min_seconds=min_not_ready(settings, lease), now=now, seen=seen,
                          status_seen=status_seen, observed=observed)


OPTED_OUT = (f"opted out by its label {NODE_OPT_OUT_LABEL}: never judged, tainted, fenced or freed (our "
             "out-of-service taint or NetworkFence, if it has one, stays until the label goes)")


def opted_out_skips(snapshot: Snapshot, settings: Settings) -> list[Skip]:
    """Why an opted-out node that would otherwise be judged (a shutdown taint, or our taint) is not."""
    return [Skip("node", n.name, OPTED_OUT) for n in sorted(snapshot.marked, key=lambda n: n.name)
            if n.opted_out and (n.our_taint is not None or shutdown_taint(n, settings.shutdown_taints))]


def tainted_nodes(nodes: Iterable[Node], settings: Settings) -> list[tuple[Node, TaintSpec]]:
    """Nodes with a shutdown taint, each with the spec it matches; opted-out nodes never."""
    found = ((node, shutdown_taint(node, settings.shutdown_taints)) for node in nodes if not node.opted_out)
    return sorted(((n, t) for n, t in found if t is not None), key=lambda pair: pair[0].name)


def judge_nodes(snapshot: Snapshot, settings: Settings) -> list[NodeVerdict]:
    """A verdict for each node with a shutdown taint, and a "recovering" one for each live node whose
    only out-of-service taint is ours (whatever SHUTDOWN_TAINTS says, so undo never depends on it)."""
    tainted = {node.name: taint for node, taint in tainted_nodes(snapshot.marked, settings)}
    verdicts = []
    redfish = settings.fencing == "redfish"
    judged = (n for n in (snapshot.nodes if redfish else snapshot.marked)  # the others: no verdict
              if n.name in tainted or ((n.our_taint is not None or redfish) and not n.opted_out))
    for node in sorted(judged, key=lambda n: n.name):
        lease = snapshot.leases.get(node.name)
        observed = snapshot.unknown_for.get(node.name, 0.0)
        if node.name in tainted:
            verdicts.append(judge_tainted_node(node, lease, tainted[node.name], settings=settings, now=snapshot.now,
                                               observed=observed))
            continue
        verdict = judge_untainted(node, lease, settings, now=snapshot.now, observed=observed,
                                  lease_observed=snapshot.lease_seen_for.get(node.name, 0.0))
        if verdict is None:
            continue
        counts = node.our_taint is not None and any(spec.matches(node.our_taint.as_dict())
                                                    for spec in settings.shutdown_taints)
        if verdict.taint == WITNESS or verdict.state is NodeState.RECOVERING or counts:
            verdicts.append(verdict)
    return verdicts


def judge_untainted(node: Node, lease: Lease | None, settings: Settings, *, now: datetime,
                    seen: str | None = None, status_seen: datetime | None = None,
                    observed: float = 0.0, lease_observed: float = 0.0) -> NodeVerdict | None:
    """A node without a shutdown taint: with FENCING=redfish, silent long enough to ask its BMC (our taint or
    not: a node we tainted that is still silent may hold more to free); else, with our taint, judge_ours; None
    when there is nothing to judge."""
    if settings.fencing == "redfish":
        silent = judge_silent(node, lease, settings, now=now, seen=seen, observed=lease_observed)
        if silent is not None and (silent.state is NodeState.DOWN or node.our_taint is None):
            return silent
    if node.our_taint is not None:
        return judge_ours(node, lease, settings, now=now, seen=seen, status_seen=status_seen, observed=observed)
    return None


def judge_ours(node: Node, lease: Lease | None, settings: Settings, *, now: datetime,
               seen: str | None = None, status_seen: datetime | None = None,
               observed: float = 0.0) -> NodeVerdict:
    """A node whose only shutdown taint is the out-of-service taint we added: recovering once alive, else not
    yet. Never down: our taint was added on the evidence of another (the cloud's, a human's), and with that
    gone (the instance runs again, say) it proves nothing by itself, so nothing more is done there."""
    verdict = judge_liveness(node, lease, str(node.our_taint), min_seconds=min_not_ready(settings, lease), now=now,
                             seen=seen, status_seen=status_seen, observed=observed)
    if verdict.state is NodeState.SPLIT_BRAIN:
        return NodeVerdict(node.name, NodeState.RECOVERING, verdict.taint,
                           "alive again and carries only the out-of-service taint rwo-failover added",
                           changes_at=verdict.changes_at)
    if verdict.state is NodeState.DOWN:
        return NodeVerdict(node.name, NodeState.NOT_YET, verdict.taint,
                           "its only shutdown taint is the one rwo-failover added: the taint that proved it shut "
                           "down is gone, so nothing more is done until it is back or tainted again",
                           verdict.not_ready_since)
    # Time alone can only make it "down", which it never is.
    return dataclasses.replace(verdict, changes_at=None, sighting_pending=False)


def not_ready_count(snapshot: Snapshot) -> int:
    return sum(1 for n in snapshot.nodes if n.ready != "True")


def unhealthy_brake(snapshot: Snapshot, settings: Settings, idle: AbstractSet[str] = frozenset()) -> Refusal | None:
    """Too many nodes not Ready: the control plane may be partitioned. `idle` nodes, proven down with nothing
    to release that a tenant could not have made up (a stopped instance whose Node is kept: evidence.left_out),
    count neither way: they say nothing about a partition, and however many there are they must not stop a real
    failover."""
    counted = [n for n in snapshot.nodes if n.name not in idle]
    total, not_ready = len(counted), sum(1 for n in counted if n.ready != "True")
    if total and not_ready / total > settings.max_unhealthy_fraction:
        return Refusal(RefusalKind.UNHEALTHY_FRACTION,
                       f"brake: {not_ready} of {total} nodes are not Ready, more than MAX_UNHEALTHY_FRACTION="
                       f"{settings.max_unhealthy_fraction:g}; the control plane may be partitioned"
                       + (f" ({len(idle)} proven-down nodes with nothing to release left out)" if idle else ""))
    return None


def nodes_brake(node_plans: Sequence[NodePlan], settings: Settings) -> Refusal | None:
    """Too many nodes to act on. Only nodes with something to release count, and only by evidence no tenant can
    write (NodePlan.counted): a stopped instance, down for good with nothing left on it but pods a tenant bound
    to it, must not make every later outage brake."""
    busy = sum(1 for n in node_plans if n.counted)
    if busy > settings.max_nodes_per_pass:
        return Refusal(RefusalKind.NODES_PER_PASS, f"brake: {busy} proven-down nodes have something to release, "
                                                   f"more than MAX_NODES_PER_PASS={settings.max_nodes_per_pass}")
    return None


def nodes_to_inspect(snapshot: Snapshot, settings: Settings) -> list[str]:
    """The nodes whose pods observe must read: proven down (or so by the server's stamps, while this process has
    not yet seen them NotReady long enough itself), or back with our taint to undo. Read even when the
    unhealthy-fraction brake may refuse, since only their pods tell a stopped instance (nothing to release,
    left out of the fraction) from an outage; a partition's nodes carry no shutdown taint and are not read."""
    return [v.node for v in judge_nodes(snapshot, settings)
            if v.state in (NodeState.DOWN, NodeState.RECOVERING) or v.sighting_pending]
