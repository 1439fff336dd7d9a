"""Decide: a pure function from a cluster snapshot and the settings to a plan.

Every rule about what may be touched lives in this package, one module per rule family:
`liveness` and `nodes` (judgment and brakes), `evidence` (what the brakes count), `pods` (selection),
`attachments` (orphans included), `taint` (the out-of-service taint), `fencing`, `redfish` (a silent node,
before NotReady), `recovery`, `caps` (the pod cap) and `types` (the Plan).
Observe and act call the same functions, so the live re-check before acting uses the same rules as the plan.

May use: the object model and settings, and nothing that does I/O or reads a clock (no kubernetes client,
no sockets, threads, time, logging or os), which import-linter checks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TypedDict

from ..model import Node, Pod, Snapshot, TaintRecord
from ..settings import Settings
from .attachments import attachments_for
from .caps import cap_pods
from .control import pause_reason, storm
from .evidence import ignored, left_out, unproven, unproven_attachments
from .fencing import bmc_key, fence_step, unfence_step, unfence_steps, uuid_twin
from .liveness import judge_liveness, lease_expires_at, lease_fresh
from .nodes import (
    judge_nodes,
    judge_ours,
    judge_tainted_node,
    judge_untainted,
    nodes_brake,
    nodes_to_inspect,
    not_ready_count,
    opted_out_skips,
    shutdown_taint,
    tainted_nodes,
    unhealthy_brake,
)
from .pods import exclusive_claims, pod_exclusion, select_pods, stuck_states
from .recovery import Verdict, controller_ref, judge_all
from .redfish import WITNESS, silent_brake
from .taint import (
    fences_now,
    lift_blocker,
    machines_now,
    recovered,
    recovered_at,
    taint_blocker,
    undo_blocker,
    untaint,
    wants_out_of_service,
)
from .types import (
    AttachmentAction,
    NodePlan,
    NodeState,
    NodeVerdict,
    Plan,
    PodAction,
    Refusal,
    RefusalKind,
    Skip,
    StormMark,
    UnsafePlan,
)
from .unreadable import unreadable_on

__all__ = ["AttachmentAction", "NodePlan", "NodeState", "NodeVerdict", "Plan", "PodAction", "Refusal",
           "RefusalKind", "Skip", "StormMark", "UnsafePlan", "exclusive_claims", "judge_liveness", "judge_nodes",
           "judge_ours", "judge_tainted_node", "judge_untainted", "lease_fresh", "lift_blocker", "nodes_to_inspect",
           "plan", "pod_exclusion", "recovered", "shutdown_taint", "stuck_states", "tainted_nodes", "undo_blocker",
           "unfence_step", "unreadable_on"]


class _Totals(TypedDict):
    """The Plan's fields that plan() gathers before its brakes, by name."""

    not_ready: int
    total_nodes: int
    untaint: tuple[str, ...]
    stale_records: tuple[TaintRecord, ...]
    rerecord: tuple[TaintRecord, ...]
    refence: tuple[tuple[str, str, str], ...]
    taint_kept: tuple[tuple[str, str], ...]
    unfence: tuple[tuple[str, str], ...]
    recovery: tuple[Verdict, ...]
    fences_held: tuple[tuple[str, str, str], ...]
    wake_at: datetime | None
    ignored: tuple[tuple[str, str], ...]
    left_out: frozenset[str]


def _plan_node(verdict: NodeVerdict, node: Node, snapshot: Snapshot, *,
               settings: Settings) -> tuple[NodePlan, list[Skip]]:
    blind = unreadable_on(verdict.node, snapshot)
    if blind:
        return NodePlan(verdict, blocked=blind), [Skip("node", verdict.node, blind)]
    pods = sorted((p for p in snapshot.pods if p.node == verdict.node), key=lambda p: p.key)
    witness = verdict.taint == WITNESS  # every pod counts as stuck: the BMC's Off is checked before any delete
    selected, skips = select_pods(pods, snapshot, settings, powered_off=witness)
    attachments, attachment_skips = attachments_for(verdict.node, selected, pods, snapshot=snapshot, settings=settings)
    skips += attachment_skips
    actions = tuple(PodAction(pod.namespace, pod.name, pod.uid, pod.node,
                              _stuck(pod, settings, witness) + f" on node {verdict.node} ({verdict.taint})",
                              tuple(c.key for c in claims),
                              controller_ref(pod.controller_kind, pod.controller_name),
                              tuple((c.uid, c.volume) for c in claims))
                    for pod, claims in selected)
    # The taint only ever comes with something to release: a stopped instance with nothing on it needs none.
    add_taint = wants_out_of_service(snapshot, settings) and not node.has_oos_taint and bool(actions or attachments)
    blocker = taint_blocker(pods, snapshot, settings) if add_taint else None
    if blocker:
        skips.append(Skip("node", node.name, blocker))
    lease = snapshot.leases.get(node.name)
    # Storage that fences on the taint (ceph-csi 3.15+ blocklists a node's clients in ControllerUnpublishVolume
    # only while the node carries it): with the handoff on, no attachment is released before the taint is on.
    taint_first = wants_out_of_service(snapshot, settings) and blocker is None
    node_plan = NodePlan(verdict, actions, tuple(attachments), add_taint and blocker is None, taint_first=taint_first,
                         lease_seen=lease.version if lease is not None else "", status_seen=node.status_written_at,
                         unproven=unproven(node, selected, snapshot),
                         unproven_attachments=unproven_attachments(node, (a.name for a in attachments), snapshot))
    if node_plan.has_work:
        step, why = fence_step(node, snapshot, settings)
        seen = snapshot.fences.get(node.name)
        node_plan = dataclasses.replace(node_plan, fence=step, fence_reason=why,
                                        fence_seen=(seen.uid, seen.version) if seen else ("", ""),
                                        machine_seen=(bmc_key(node, settings), node.system_uuid,
                                                      uuid_twin(node, snapshot))
                                        if settings.fencing == "redfish" else ("", "", ""))
    return node_plan, skips


def _stuck(pod: Pod, settings: Settings, powered_off: bool) -> str:
    if powered_off:
        return "on a node whose BMC must report it powered off before the pod is deleted"
    return "stuck: " + ",".join(s for s in stuck_states(pod) if s in settings.stuck_pod_states)


def wake_at(verdicts: Iterable[NodeVerdict], snapshot: Snapshot, settings: Settings, *,
            recovery: Iterable[Verdict]) -> datetime | None:
    """The earliest moment, after now, at which time alone changes a decision: a verdict's changes_at, a
    recovering node reaching RECOVERY_SECONDS (its undo and its unfencing), a recovery timing out."""
    moments = [v.changes_at for v in verdicts]
    for node in snapshot.marked:
        if node.our_taint or node.name in snapshot.fences:  # undo and unfencing wait for both
            lease = snapshot.leases.get(node.name)
            moments += [recovered_at(node, lease, settings), lease_expires_at(lease)]
    moments += [r.times_out_at for r in recovery]
    return min((m for m in moments if m is not None and m > snapshot.now), default=None)


def plan(snapshot: Snapshot, settings: Settings) -> Plan:
    """The whole decision for one pass."""
    verdicts = judge_nodes(snapshot, settings)
    skips = [Skip(u.kind, u.name, f"cannot be read: {u.reason}") for u in snapshot.unreadable]
    skips += [Skip("node", v.node, v.reason) for v in verdicts if v.state is not NodeState.DOWN]
    skips += opted_out_skips(snapshot, settings)
    nodes = snapshot.by_name
    untainted, stale, kept, undo_skips = untaint(verdicts, snapshot, settings)
    unfence, unfence_skips, fences_held = unfence_steps(snapshot, settings)
    skips += undo_skips + unfence_skips
    node_plans = []
    for verdict in (v for v in verdicts if v.state is NodeState.DOWN):
        node_plan, node_skips = _plan_node(verdict, nodes[verdict.node], snapshot, settings=settings)
        node_plans.append(node_plan)
        skips += node_skips
    # Down with nothing to release that a tenant could not have made up: a stopped instance, tenants' pods
    # naming it or not (evidence.py).
    # A node merely silent (FENCING=redfish) is not proven down: never left out, however little it holds;
    # one we tainted (its BMC answered Off in an earlier pass) and still silent is, as a stopped instance.
    idle = left_out([p for p in node_plans if p.verdict.taint != WITNESS or nodes[p.verdict.node].our_taint],
                    snapshot)
    # Down by the server's stamps, not yet by this process's own sighting (a one-shot run's first pass): planned
    # only to tell a stopped instance, which holds nothing and counts neither way, from an outage; never acted on.
    # A silent node (FENCING=redfish) is never one of them: a partition silences Leases too.
    idle |= left_out([_plan_node(v, nodes[v.node], snapshot, settings=settings)[0] for v in verdicts
                      if v.sighting_pending and v.state is NodeState.NOT_YET and v.taint != WITNESS], snapshot)
    recovery = judge_all(snapshot, settings)
    skips += [Skip("recovery record", v.entry.name, v.detail) for v in recovery if v.state == "unreadable"]
    totals: _Totals = {"not_ready": not_ready_count(snapshot), "total_nodes": len(snapshot.nodes), "untaint": untainted,
              "stale_records": stale, "rerecord": machines_now(snapshot), "refence": fences_now(snapshot),
              "taint_kept": kept, "unfence": unfence,
              "recovery": recovery,
              "fences_held": fences_held,
              "wake_at": wake_at(verdicts, snapshot, settings, recovery=recovery), "ignored": ignored(node_plans, idle),
              "left_out": idle}
    brake = (unhealthy_brake(snapshot, settings, idle) or silent_brake(snapshot, settings, idle)
             or nodes_brake(node_plans, settings))
    refusal, mark, resumes = storm(snapshot, settings, brake)
    if resumes is not None:  # the cool-down's end changes the decision with nothing but time
        totals["wake_at"] = min(resumes, totals["wake_at"] or resumes)
    minute = int(snapshot.now.timestamp() // 60)
    capped, deferred, cap_skips = cap_pods(node_plans, settings.max_pods_per_pass, minute)
    if deferred:  # the cap's first namespace turns with the minute: a plan that changes then must wake for it
        turns = datetime.fromtimestamp((minute + 1) * 60, UTC)
        totals["wake_at"] = min(turns, totals["wake_at"] or turns)
    return Plan(tuple(verdicts), capped, tuple(skips + cap_skips), refusal, deferred=deferred,
                paused=pause_reason(snapshot, settings), storm_mark=mark, judged_at=snapshot.now, **totals)
