"""Node judgment (down, not yet, split-brain, recovering) and the node brakes."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Iterable, Optional, Sequence

from ..config import Settings
from ..matchers import TaintSpec, any_taint_matches
from ..model import DEFAULT_LEASE_SECONDS, Lease, Node, Snapshot
from .types import NodePlan, NodeState, NodeVerdict, Refusal, RefusalKind


def age(now: datetime, then: datetime) -> float:
    return (now - then).total_seconds()


def shutdown_taint(node: Node, specs: Sequence[TaintSpec]) -> Optional[TaintSpec]:
    """The first spec matching one of the node's taints; our own out-of-service taint never counts."""
    ours = node.our_taint
    return any_taint_matches(specs, [t.as_dict() for t in node.taints if t is not ours])


def lease_fresh(lease: Optional[Lease], now: datetime) -> bool:
    """Renewed within the Lease's own duration: the kubelet is heartbeating."""
    return lease is not None and lease.renew_time is not None and age(now, lease.renew_time) < lease.duration


def lease_expires_at(lease: Optional[Lease]) -> Optional[datetime]:
    """When a fresh Lease stops being fresh, unless renewed."""
    if lease is None or lease.renew_time is None:
        return None
    return lease.renew_time + timedelta(seconds=lease.duration)


def judge_liveness(node: Node, lease: Optional[Lease], taint: str, min_seconds: int,
                   now: datetime) -> NodeVerdict:
    """Liveness alone: down, not yet, or split-brain. Alive signals are checked first: they win.

    Down needs Ready not True for MIN_NOT_READY_SECONDS and the Lease unrenewed for the longer of that
    and the Lease's own duration, so a low minimum never makes a fresh Lease look stale. A Lease that
    is stale but not yet that old is "not yet": the normal start of an outage, never split-brain.
    It does not know whose taint the node carries; judge_tainted_node adds that.
    """
    def verdict(state: NodeState, reason: str, changes_at: Optional[datetime] = None) -> NodeVerdict:
        since = node.ready_since.strftime("%Y-%m-%dT%H:%M:%SZ") if node.ready_since and node.ready != "True" else ""
        return NodeVerdict(node.name, state, taint, reason, since, changes_at)

    if node.ready == "True":
        return verdict(NodeState.SPLIT_BRAIN, "tainted for shutdown but still heartbeating: Ready=True")
    if lease_fresh(lease, now):
        assert lease is not None and lease.renew_time is not None
        return verdict(NodeState.SPLIT_BRAIN, "tainted for shutdown but still heartbeating: Lease renewed "
                                              f"{age(now, lease.renew_time):.0f}s ago, within its "
                                              f"{lease.duration}s duration",
                       lease.renew_time + timedelta(seconds=lease.duration))
    if node.ready is None or node.ready_since is None:
        return verdict(NodeState.NOT_YET, "no Ready condition with a transition time")
    down_for = age(now, node.ready_since)
    # Down once Ready has been not True long enough and the Lease unrenewed long enough: both, so the later.
    ready_enough = node.ready_since + timedelta(seconds=min_seconds)
    needed = max(min_seconds, lease.duration) if lease is not None else 0
    lease_enough = lease.renew_time + timedelta(seconds=needed) if lease and lease.renew_time else ready_enough
    if down_for < min_seconds:
        return verdict(NodeState.NOT_YET, f"Ready={node.ready} for {down_for:.0f}s, under {min_seconds}s",
                       max(ready_enough, lease_enough))
    if lease is None or lease.renew_time is None:
        return verdict(NodeState.DOWN, f"Ready={node.ready} for {down_for:.0f}s, no Lease")
    unrenewed = age(now, lease.renew_time)
    if unrenewed < needed:
        return verdict(NodeState.NOT_YET, f"Lease unrenewed for {unrenewed:.0f}s, under {needed}s", lease_enough)
    return verdict(NodeState.DOWN, f"Ready={node.ready} for {down_for:.0f}s, Lease unrenewed for {unrenewed:.0f}s")


def min_not_ready(settings: Settings, lease: Optional[Lease]) -> int:
    """The NotReady time that makes a node down: MIN_NOT_READY_SECONDS; or, with fencing (whose confirmation
    is then required before acting), FENCED_MIN_NOT_READY_SECONDS, by default the node's own Lease duration."""
    if settings.fencing == "none":
        return settings.min_not_ready_seconds
    if settings.fenced_min_not_ready_seconds is not None:
        return settings.fenced_min_not_ready_seconds
    return lease.duration if lease is not None else DEFAULT_LEASE_SECONDS


def judge_tainted_node(node: Node, lease: Optional[Lease], taint: TaintSpec, settings: Settings,
                       now: datetime) -> NodeVerdict:
    """judge_liveness of a node with a shutdown taint (never our own, see shutdown_taint)."""
    return judge_liveness(node, lease, str(taint), min_not_ready(settings, lease), now)


def tainted_nodes(nodes: Iterable[Node], settings: Settings) -> list[tuple[Node, TaintSpec]]:
    found = ((node, shutdown_taint(node, settings.shutdown_taints)) for node in nodes)
    return sorted(((n, t) for n, t in found if t is not None), key=lambda pair: pair[0].name)


def judge_nodes(snapshot: Snapshot, settings: Settings) -> list[NodeVerdict]:
    """A verdict for each node with a shutdown taint, and a "recovering" one for each live node whose
    only out-of-service taint is ours (whatever SHUTDOWN_TAINTS says, so undo never depends on it)."""
    tainted = {node.name: taint for node, taint in tainted_nodes(snapshot.nodes, settings)}
    verdicts = []
    for node in sorted(snapshot.nodes, key=lambda n: n.name):
        lease = snapshot.leases.get(node.name)
        if node.name in tainted:
            verdicts.append(judge_tainted_node(node, lease, tainted[node.name], settings, snapshot.now))
        elif node.our_taint is not None:
            verdict = judge_ours(node, lease, settings, snapshot.now)
            counts = any(spec.matches(node.our_taint.as_dict()) for spec in settings.shutdown_taints)
            if verdict.state is NodeState.RECOVERING or counts:
                verdicts.append(verdict)
    return verdicts


def judge_ours(node: Node, lease: Optional[Lease], settings: Settings, now: datetime) -> NodeVerdict:
    """A node whose only shutdown taint is the out-of-service taint we added: still down, or recovering."""
    verdict = judge_liveness(node, lease, str(node.our_taint), min_not_ready(settings, lease), now)
    if verdict.state is NodeState.SPLIT_BRAIN:
        return NodeVerdict(node.name, NodeState.RECOVERING, verdict.taint,
                           "alive again and carries only the out-of-service taint rwo-failover added",
                           changes_at=verdict.changes_at)
    return verdict


def not_ready_count(snapshot: Snapshot) -> int:
    return sum(1 for n in snapshot.nodes if n.ready != "True")


def unhealthy_brake(snapshot: Snapshot, settings: Settings) -> Optional[Refusal]:
    """Too many nodes not Ready: the control plane may be partitioned. Stopped instances count here too,
    since they are not Ready; MAX_UNHEALTHY_FRACTION is what allows for them."""
    total, not_ready = len(snapshot.nodes), not_ready_count(snapshot)
    if total and not_ready / total > settings.max_unhealthy_fraction:
        return Refusal(RefusalKind.UNHEALTHY_FRACTION,
                       f"brake: {not_ready} of {total} nodes are not Ready, more than MAX_UNHEALTHY_FRACTION="
                       f"{settings.max_unhealthy_fraction:g}; the control plane may be partitioned")
    return None


def nodes_brake(node_plans: Sequence[NodePlan], settings: Settings) -> Optional[Refusal]:
    """Too many nodes to act on. Only nodes with work count: a stopped instance, down for good with nothing
    left on it, must not make every later outage brake."""
    busy = sum(1 for n in node_plans if n.has_work)
    if busy > settings.max_nodes_per_pass:
        return Refusal(RefusalKind.NODES_PER_PASS, f"brake: {busy} proven-down nodes have work, more than "
                                                   f"MAX_NODES_PER_PASS={settings.max_nodes_per_pass}")
    return None


def nodes_to_inspect(snapshot: Snapshot, settings: Settings) -> list[str]:
    """The nodes whose pods observe must read: proven down (or back, with our taint to undo), unless the
    unhealthy-fraction brake already refuses the pass."""
    if unhealthy_brake(snapshot, settings):
        return []
    return [v.node for v in judge_nodes(snapshot, settings)
            if v.state in (NodeState.DOWN, NodeState.RECOVERING)]
