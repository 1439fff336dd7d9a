"""Act: carry out a plan, node by node, after re-checking each node live.

Order per node, because the attach-detach controller re-creates a VolumeAttachment
whose pod still exists: add the out-of-service taint, force-delete the pods (with a
UID precondition), then delete the VolumeAttachments whose pods are all gone, then
record Events. Every write goes through `writer.Writer`; this module holds only the
order of operations and the live re-checks.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Callable, Mapping, Optional

from .client import Api, ApiError
from .config import Settings
from .events import EventRecorder
from .fencing import Fencer
from .metrics import Metrics
from .recovery import RecoveryTracker
from .model import Lease, Node
from .node_taint import LANDED, Build, add_patch, drop_annotation_patch, read_modify_write, remove_patch
from .outcome import Outcome
from .planner import (AttachmentAction, NodePlan, NodeState, NodeVerdict, Plan, PodAction, judge_ours,
                      judge_tainted_node, recovered, shutdown_taint)
from .writer import Guard, Result, Writer

log = logging.getLogger("rwo_failover")
Live = tuple[Node, Optional[Lease], dict]


class Actor:
    def __init__(self, api: Api, settings: Settings, now: Callable[[], datetime],
                 metrics: Optional[Metrics] = None, guard: Optional[Guard] = None,
                 node_uids: Optional[Mapping[str, str]] = None) -> None:
        self.api, self.settings, self.now = api, settings, now
        # Each node's uid, for its Events: from the snapshot, then from every live read (a node deleted and
        # re-registered under the same name is another object).
        self.node_uids = dict(node_uids or {})
        self.outcome = Outcome()
        self.writer = Writer(api, settings.dry_run, self.outcome, guard)
        self.events = EventRecorder(self.writer, now)
        self.fencer = Fencer(api, settings, self.writer, self.events, self.outcome, api.sleep)
        self.recovery = RecoveryTracker(self.writer, self.events, metrics, now)

    def warn_split_brain(self, verdicts: tuple[NodeVerdict, ...]) -> None:
        for verdict in verdicts:
            self.outcome.split_brain.append(verdict.node)
            log.error("refusing node: tainted for shutdown but alive", extra={"node": verdict.node,
                      "taint": verdict.taint, "reason": verdict.reason})
            self.events.repeated(verdict.node, self.node_uids.get(verdict.node, ""), "ShutdownTaintOnLiveNode",
                                 f"{verdict.reason}; rwo-failover will not touch this node. "
                                 f"Check the taint {verdict.taint}.")

    def record_refusal(self, plan: Plan) -> None:
        # One Event per down node that has work, capped, so a mass outage does not become an Event storm;
        # with the unhealthy-fraction brake no node was planned, so every down node is named (capped).
        busy = [n.verdict for n in plan.busy_nodes] or [v for v in plan.verdicts if v.state is NodeState.DOWN]
        for verdict in busy[: self.settings.max_nodes_per_pass]:
            self.events.repeated(verdict.node, self.node_uids.get(verdict.node, ""), "FailoverRefused",
                                 f"{plan.refusal}; nothing was deleted")

    def execute(self, plan: Plan) -> Outcome:
        plan.raise_if_unsafe()
        for node_plan in plan.nodes:
            if node_plan.has_work:
                self._act_on_node(node_plan)
        for name in plan.untaint:
            self._remove_taint(name)
        for name in plan.drop_annotation:
            self._drop_annotation(name)
        for name, step in plan.unfence:
            self.fencer.unfence(name, self.node_uids.get(name, ""), step)
        for verdict in plan.recovery:
            self.recovery.settle(verdict)
        return self.outcome

    def _act_on_node(self, node_plan: NodePlan) -> None:
        name = node_plan.verdict.node
        checked = self._recheck(name)
        if checked is None:
            return
        verdict, node, raw = checked
        if verdict.state is not NodeState.DOWN:
            self.outcome.nodes_not_down_on_recheck.append(name)
            log.warning("node no longer proven down on live re-check; skipping it",
                        extra={"node": name, "state": verdict.state.value, "reason": verdict.reason})
            if verdict.state is NodeState.SPLIT_BRAIN:
                self.warn_split_brain((verdict,))
            return
        if not self.fencer.ensure(node_plan, node):
            return  # fencing not confirmed: no pod, no attachment, no taint
        if node_plan.add_taint:
            # First, so the attach-detach controller force-detaches the moment each pod is gone.
            self._add_taint(name, raw)
        if not (node_plan.pods or node_plan.attachments):
            return
        gone = {p.key for p in node_plan.pods if self._delete_pod(p, verdict.not_ready_since)}
        releasable = [a for a in node_plan.attachments if self._releasable(a, gone)]
        if releasable and node_plan.pods and not self._still_down(name):
            releasable = []
        released = [a for a in releasable if self._release(a)]
        deleted = ", ".join(sorted(gone)) or "no pods"
        volumes = ", ".join(a.name for a in released) or "no VolumeAttachments"
        self.events.node(name, node.uid, "Normal", "RWOVolumesReleased",
                         f"node proven down ({verdict.reason}, taint {verdict.taint}); force-deleted {deleted}; "
                         f"deleted {volumes}")

    def _read_live(self, name: str, purpose: str) -> Optional[Live]:
        """The node (also raw, for its resourceVersion) and its Lease, read now; None after recording why not."""
        try:
            raw = self.api.read_node(name)
            lease_raw = self.api.read_lease(name) if raw else None
        except ApiError as err:
            self.writer.fail(f"{purpose} of node {name} failed: {err}", err)
            return None
        if raw is None:
            self.writer.fail(f"node {name} disappeared before the {purpose}; skipped")
            return None
        node = Node.from_json(raw)
        self.node_uids[name] = node.uid
        return node, (Lease.from_json(lease_raw) if lease_raw else None), raw

    def _recheck(self, name: str) -> Optional[tuple[NodeVerdict, Node, dict]]:
        """Judge the node again, live, with the same rule as the plan; the verdict, the node, and its raw JSON."""
        live = self._read_live(name, "re-check")
        if live is None:
            return None
        node, lease, raw = live
        taint = shutdown_taint(node, self.settings.shutdown_taints)
        if taint is not None:
            verdict = judge_tainted_node(node, lease, taint, self.settings, self.now())
        elif node.our_taint is not None:
            verdict = judge_ours(node, lease, self.settings, self.now())
        else:
            verdict = NodeVerdict(name, NodeState.NOT_YET, "", "shutdown taint removed since the pass began")
        return verdict, node, raw

    def _still_down(self, name: str) -> bool:
        """The node once more, live, between the pod deletes and the attachment deletes: a node that came back
        in between must keep its volumes, or they would be pulled from under its running pods."""
        if self.settings.dry_run:
            return True
        checked = self._recheck(name)
        if checked is None:
            return False
        verdict = checked[0]
        if verdict.state is NodeState.DOWN:
            return True
        log.warning("node is no longer proven down; its VolumeAttachments stay",
                    extra={"node": name, "state": verdict.state.value, "reason": verdict.reason})
        if verdict.state is NodeState.SPLIT_BRAIN:
            self.warn_split_brain((verdict,))
        return False

    def _add_taint(self, name: str, raw: dict) -> None:
        stamp = self.events.stamp()

        def build(reread: bool) -> Build:
            nonlocal raw
            if reread:  # after a 409 someone changed the node: judge it again from scratch
                checked = self._recheck(name)
                if checked is None or checked[0].state is not NodeState.DOWN:
                    log.warning("node changed and is no longer proven down; out-of-service taint not added",
                                extra={"node": name})
                    return None
                _verdict, live, raw = checked
                if live.our_taint is not None and live.oos_added_at == stamp:
                    return LANDED  # our own patch, whose answer was lost: it is there
            patch = add_patch(raw, stamp)
            if patch is None:
                log.info("out-of-service taint already present; not ours to manage", extra={"node": name})
                return None
            return raw, patch

        if read_modify_write(self.writer, name, "add the out-of-service taint", build):
            self.outcome.taints_added.append(name)
            log.info("added the out-of-service taint", extra={"node": name})
            self.events.node(name, self.node_uids.get(name, ""), "Normal", "OutOfServiceTaintAdded",
                             "node proven down; added node.kubernetes.io/out-of-service=nodeshutdown:NoExecute so "
                             "Kubernetes force-detaches its volumes; rwo-failover removes it once the node is back")

    def _remove_taint(self, name: str) -> None:
        """Take our out-of-service taint (and annotation) off a node that is back, and only ours."""
        added_at = ""

        def build(_reread: bool) -> Build:
            nonlocal added_at
            live = self._read_live(name, "re-check of a recovered node")
            if live is None:
                return None
            node, lease, raw = live
            ours = node.our_taint
            blocker = "not ours" if ours is None else \
                "another shutdown taint" if shutdown_taint(node, self.settings.shutdown_taints) else \
                recovered(node, lease, self.settings, self.now())
            if blocker:
                log.info("out-of-service taint left in place", extra={"node": name, "reason": blocker})
                return None
            added_at = node.oos_added_at or ""
            return raw, remove_patch(raw, ours)

        if read_modify_write(self.writer, name, "remove our out-of-service taint", build):
            self.outcome.taints_removed.append(name)
            log.info("removed our out-of-service taint from a recovered node", extra={"node": name})
            self.events.node(name, self.node_uids.get(name, ""), "Normal", "OutOfServiceTaintRemoved",
                             f"node Ready for {self.settings.recovery_seconds}s or more with a fresh Lease; "
                             f"removed the node.kubernetes.io/out-of-service taint rwo-failover added at {added_at}")

    def _drop_annotation(self, name: str) -> None:
        """Our annotation outlived our taint (a human removed the taint): drop it, so a later out-of-service
        taint of theirs is never taken for ours."""
        def build(_reread: bool) -> Build:
            live = self._read_live(name, "re-check of a node with our annotation")
            if live is None or live[0].our_taint is not None or not live[0].oos_added_at:
                return None
            return live[2], drop_annotation_patch()

        if read_modify_write(self.writer, name, "drop our annotation, whose taint is gone", build):
            log.info("dropped our out-of-service annotation: its taint is gone", extra={"node": name})

    def _delete_pod(self, action: PodAction, not_ready_since: str) -> bool:
        """True when the pod we inspected is gone (or would be, in a dry run)."""
        fields = {"pod": action.key, "uid": action.uid, "node": action.node, "reason": action.reason,
                  "claims": list(action.claims)}
        result = self.writer.delete_pod(action.namespace, action.name, action.uid, fields)
        if result is Result.WOULD:
            return True
        if result is Result.CONFLICT:
            log.warning("pod was replaced since it was inspected (UID differs); left alone", extra=fields)
        if result is Result.HELD:
            # Still there: the attach-detach controller would re-create any attachment we delete now.
            finalizers = ", ".join(self.writer.body["metadata"]["finalizers"])
            self.writer.fail(f"pod {action.key} is held by finalizers {finalizers}; its volumes stay "
                             "attached until they are removed")
            return False
        if result not in (Result.DONE, Result.GONE):
            return False
        log.info("force-deleted pod" if result is Result.DONE else "pod already gone", extra=fields)
        if result is Result.DONE:
            self.recovery.mark(action, not_ready_since)
        self.events.pod(action.namespace, action.name, action.uid, "ForceDeletedFromDeadNode",
                        f"{action.reason}; force-deleted by rwo-failover to release {', '.join(action.claims)}")
        return True

    @staticmethod
    def _fields(action: AttachmentAction) -> dict:
        return {"volumeattachment": action.name, "node": action.node, "pv": action.volume, "claim": action.claim}

    def _releasable(self, action: AttachmentAction, gone: set[str]) -> bool:
        waiting = sorted(set(action.after_pods) - gone)
        if waiting:
            self.outcome.attachments_held.append(action.name)
            log.warning("VolumeAttachment kept: its pod is not gone, and the controller would re-create it",
                        extra=dict(self._fields(action), waiting_for=waiting))
        return not waiting

    def _release(self, action: AttachmentAction) -> bool:
        fields = self._fields(action)
        result = self.writer.delete_attachment(action.name, fields)
        if result is Result.WOULD:
            return True
        if result not in (Result.DONE, Result.GONE):
            return False
        log.info("deleted VolumeAttachment" if result is Result.DONE else "VolumeAttachment already gone",
                 extra=fields)
        self.events.claim(action.claim, action.claim_uid, "VolumeReleasedFromDeadNode",
                          f"deleted VolumeAttachment {action.name} of PV {action.volume} on dead node {action.node}")
        return True
