"""Node judgment (down, not yet, split-brain, recovering) and the node brakes."""

from __future__ import annotations

from datetime import datetime
from typing import Iterable, Optional, Sequence

from ..config import Settings
from ..matchers import TaintSpec, any_taint_matches
from ..model import OUT_OF_SERVICE_KEY, Lease, Node, Snapshot
from .types import NodeState, NodeVerdict, Refusal, RefusalKind

LEASE_FRESH_SECONDS = 40  # kubelet's default node lease duration: renewed within it means heartbeating


def age(now: datetime, then: datetime) -> float:
    return (now - then).total_seconds()


def shutdown_taint(node: Node, specs: Sequence[TaintSpec]) -> Optional[TaintSpec]:
    return any_taint_matches(specs, [t.as_dict() for t in node.taints])


def judge_liveness(node: Node, lease: Optional[Lease], taint: TaintSpec, min_seconds: int,
                   now: datetime) -> NodeVerdict:
    """Liveness alone: down, not yet, or split-brain. Alive signals are checked first: they win.

    It does not know whose taint the node carries; judge_tainted_node adds that.
    """
    def verdict(state: NodeState, reason: str) -> NodeVerdict:
        return NodeVerdict(node.name, state, str(taint), reason)

    if node.ready == "True":
        return verdict(NodeState.SPLIT_BRAIN, "tainted for shutdown but still heartbeating: Ready=True")
    if lease is not None and lease.renew_time is not None and age(now, lease.renew_time) < min_seconds:
        return verdict(NodeState.SPLIT_BRAIN, "tainted for shutdown but still heartbeating: "
                                              f"Lease renewed {age(now, lease.renew_time):.0f}s ago")
    if node.ready is None or node.ready_since is None:
        return verdict(NodeState.NOT_YET, "no Ready condition with a transition time")
    down_for = age(now, node.ready_since)
    if down_for < min_seconds:
        return verdict(NodeState.NOT_YET, f"Ready={node.ready} for {down_for:.0f}s, under {min_seconds}s")
    lease_text = "no Lease" if lease is None or lease.renew_time is None else \
        f"Lease unrenewed for {age(now, lease.renew_time):.0f}s"
    return verdict(NodeState.DOWN, f"Ready={node.ready} for {down_for:.0f}s, {lease_text}")


def only_our_taint(node: Node, specs: Sequence[TaintSpec]) -> bool:
    """The node's only shutdown taint is the out-of-service taint that we added (and annotated)."""
    matching = [t for t in node.taints if any(spec.matches(t.as_dict()) for spec in specs)]
    return node.oos_added_at is not None and bool(matching) and all(t.key == OUT_OF_SERVICE_KEY for t in matching)


def judge_tainted_node(node: Node, lease: Optional[Lease], taint: TaintSpec, settings: Settings,
                       now: datetime) -> NodeVerdict:
    """judge_liveness, plus ownership: an alive node whose only shutdown taint is ours is recovering."""
    verdict = judge_liveness(node, lease, taint, settings.min_not_ready_seconds, now)
    if verdict.state is NodeState.SPLIT_BRAIN and only_our_taint(node, settings.shutdown_taints):
        return NodeVerdict(node.name, NodeState.RECOVERING, verdict.taint,
                           "alive again and carries only the out-of-service taint rwo-failover added")
    return verdict


def tainted_nodes(nodes: Iterable[Node], settings: Settings) -> list[tuple[Node, TaintSpec]]:
    found = ((node, shutdown_taint(node, settings.shutdown_taints)) for node in nodes)
    return sorted(((n, t) for n, t in found if t is not None), key=lambda pair: pair[0].name)


def judge_nodes(snapshot: Snapshot, settings: Settings) -> list[NodeVerdict]:
    return [judge_tainted_node(node, snapshot.leases.get(node.name), taint, settings, snapshot.now)
            for node, taint in tainted_nodes(snapshot.nodes, settings)]


def not_ready_count(snapshot: Snapshot) -> int:
    return sum(1 for n in snapshot.nodes if n.ready != "True")


def node_brake(snapshot: Snapshot, settings: Settings, verdicts: Sequence[NodeVerdict]) -> Optional[Refusal]:
    """Why the whole pass must act on nothing, judged on nodes alone; None when it may go on."""
    total, not_ready = len(snapshot.nodes), not_ready_count(snapshot)
    if total and not_ready / total > settings.max_unhealthy_fraction:
        return Refusal(RefusalKind.UNHEALTHY_FRACTION,
                       f"brake: {not_ready} of {total} nodes are not Ready, more than MAX_UNHEALTHY_FRACTION="
                       f"{settings.max_unhealthy_fraction:g}; the control plane may be partitioned")
    down = sum(1 for v in verdicts if v.state is NodeState.DOWN)
    if down > settings.max_nodes_per_pass:
        return Refusal(RefusalKind.NODES_PER_PASS, f"brake: {down} nodes are proven down, more than "
                                                   f"MAX_NODES_PER_PASS={settings.max_nodes_per_pass}")
    return None


def nodes_to_inspect(snapshot: Snapshot, settings: Settings) -> list[str]:
    """The nodes whose pods observe must read: proven down, and the brake not tripped."""
    verdicts = judge_nodes(snapshot, settings)
    if node_brake(snapshot, settings, verdicts):
        return []
    return [v.node for v in verdicts if v.state is NodeState.DOWN]
