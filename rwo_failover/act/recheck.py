"""The live re-check: before every destructive write on a node, its node and Lease are read again and judged
with the plan's own rules, and against the Lease the plan saw, so a renewal the pass watched happen is a
sign of life. Once a node fails a re-check, nothing more is written on it in this pass."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from ..kube import Api, ApiError
from ..model import BadObject, Json, Lease, Node
from ..observe.sightings import Sightings
from ..planner import NodePlan, NodeState, NodeVerdict, judge_tainted_node, judge_untainted, shutdown_taint
from ..planner.nodes import OPTED_OUT
from ..settings import Settings
from .outcome import Outcome
from .taint_records import TaintRecords
from .writer import Writer

log = logging.getLogger(__name__)
Live = tuple[Node, Lease | None, Json]


class Rechecker:
    def __init__(self, api: Api, settings: Settings, writer: Writer, *, outcome: Outcome, now: Callable[[], datetime],
                 on_split_brain: Callable[[NodeVerdict], None], records: TaintRecords, sightings: Sightings) -> None:
        self.api, self.settings, self.writer, self.outcome, self.now = api, settings, writer, outcome, now
        self.on_split_brain, self.records, self.sightings = on_split_brain, records, sightings
        self.lost: set[str] = set()  # nodes that failed a re-check in this pass: nothing more is written there

    def read_live(self, name: str, purpose: str, *, recent_record: bool = False) -> Live | None:
        """The node (also raw, for its resourceVersion) and its Lease, read now; None after recording why not. A
        node carrying an out-of-service taint comes with our record of it, read now too (with `recent_record`, as
        read less than a second ago: taint_records.py): which taint is ours."""
        try:
            raw = self.api.read_node(name)
            lease_raw = self.api.read_lease(name) if raw else None
            if raw is None:
                self.writer.fail(f"node {name} disappeared before the {purpose}; skipped")
                return None
            if not isinstance(raw, dict) or not isinstance(lease_raw, (dict, type(None))):
                raise BadObject("not a JSON object")
            node = Node.from_json(raw)
            if node.has_oos_taint:
                records = self.records.read(node, purpose, recent=recent_record)
                if records is None:
                    return None
                node = node.with_record(records)
            return node, (Lease.from_json(lease_raw) if lease_raw else None), raw
        except ApiError as err:
            self.writer.fail(f"{purpose} of node {name} failed: {err}", err)
        except BadObject as err:
            self.writer.fail(f"{purpose} of node {name}: the node or its Lease cannot be read ({err}); skipped")
        return None

    def judge(self, name: str, seen: str | None = None,
              status_seen: datetime | None = None) -> tuple[NodeVerdict, Node, Json] | None:
        """Judge the node again, live, with the plan's rule; the verdict, the node, and its raw JSON."""
        live = self.read_live(name, "re-check", recent_record=True)
        if live is None:
            return None
        node, lease, raw = live
        taint = shutdown_taint(node, self.settings.shutdown_taints)
        if node.opted_out:  # labelled since the plan: the operator's word, read live as liveness is
            verdict = NodeVerdict(name, NodeState.NOT_YET, "", OPTED_OUT)
        elif taint is not None:
            verdict = judge_tainted_node(node, lease, taint, settings=self.settings, now=self.now(), seen=seen,
                                         status_seen=status_seen, observed=self.sightings.age(node))
        else:  # FENCING=redfish's silent node, or a node with only our taint, or nothing to judge any more
            verdict = judge_untainted(node, lease, self.settings, now=self.now(), seen=seen, status_seen=status_seen,
                                      observed=self.sightings.age(node),
                                      lease_observed=self.sightings.lease_age(name, lease)) or \
                NodeVerdict(name, NodeState.NOT_YET, "", "shutdown taint removed since the pass began")
        return verdict, node, raw

    @contextmanager
    def on_every_retry(self, node_plan: NodePlan) -> Iterator[None]:
        """Within: a destructive write whose answer was lost is resent only after the node passes another live
        re-check (a kubelet may come back while the attempt went unanswered), and the pause switch, read live,
        is still off."""
        def guard() -> str | None:
            if self.confirm_down(node_plan) is None:
                return "the node is no longer proven down on the live re-check before a retry"
            return self.writer.live_pause() if self.writer.live_pause else None  # the pause, read live too
        self.api.retry_guard = guard
        try:
            yield
        finally:
            self.api.retry_guard = None

    def confirm_down(self, node_plan: NodePlan) -> tuple[Node, Json] | None:
        """The node and its raw JSON when it is still proven down now, live; None (after saying why, once) when
        it is not, or cannot be read: then nothing more is written on it in this pass."""
        name = node_plan.verdict.node
        if name in self.lost:
            return None
        checked = self.judge(name, node_plan.lease_seen, node_plan.status_seen)
        if checked is not None and checked[0].state is NodeState.DOWN:
            return checked[1], checked[2]
        self.lost.add(name)
        if checked is not None:
            verdict = checked[0]
            self.outcome.nodes_not_down_on_recheck.append(name)
            log.warning("node no longer proven down on live re-check; nothing more is written on it",
                        extra={"node": name, "state": verdict.state.value, "reason": verdict.reason})
            if verdict.state is NodeState.SPLIT_BRAIN:
                self.on_split_brain(verdict)
        return None
