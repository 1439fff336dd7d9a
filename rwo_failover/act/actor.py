"""Act: carry out a plan, node by node, after re-checking each node live.

Order per node, because the attach-detach controller re-creates a VolumeAttachment
whose pod still exists: add the out-of-service taint, force-delete the pods (with a
UID precondition), then delete the VolumeAttachments whose pods are all gone, then
record Events. Each of these writes, and the fencing before them, waits for its own
live re-check (recheck.py). Every write goes through `writer.Writer`; this module
holds only the order of operations.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime

from ..kube import Api
from ..model import Unreadable, bounded_list
from ..model.event_reasons import Reason
from ..observe.sightings import Sightings
from ..planner import AttachmentAction, NodePlan, NodeState, NodeVerdict, Plan, PodAction, RefusalKind
from ..settings import Settings
from .control import record_storm
from .events import EventRecorder
from .fence_machine import record_machine
from .fencing import Fencer
from .our_taint import OurTaint
from .outcome import Outcome
from .recheck import Rechecker
from .recovery import RecoveryMetrics, RecoveryTracker
from .taint_records import TaintRecords
from .writer import Guard, Result, Writer

log = logging.getLogger(__name__)
# What lifts our taint from a node that came back, by UNDO's proof of a power cycle (planner/undo.py).
UNDO_HOW = {"bootid": "Reboot the machine (a new bootID lets rwo-failover remove its taint)",
            "operator": "Power-cycle the machine, then confirm it as said above (UNDO=operator)",
            "bmc": "Power-cycle the machine; rwo-failover removes its taint once the node reports a new bootID and "
                   "its BMC answers PowerState On (UNDO=bmc)"}


class Actor:
    def __init__(self, api: Api, settings: Settings, now: Callable[[], datetime], *, sightings: Sightings,
                 metrics: RecoveryMetrics | None = None, guard: Guard | None = None,
                 node_uids: Mapping[str, str] | None = None, live_pause: Guard | None = None,
                 memory: tuple[bool, Guard | None] | None = None) -> None:
        """`guard` is asked before every write, `live_pause` (the pause switch read live) before every destructive
        one. `memory` (dry run, guard) is for what a pass remembers, the storm moments: written under the stop and
        leadership guard alone, so a storm seen by a paused pass is still remembered; by default as the rest."""
        self.api, self.settings, self.now = api, settings, now
        # Each node's uid, for its Events: from the snapshot, then from the live re-checks (a node deleted and
        # re-registered under the same name is another object).
        self.node_uids = dict(node_uids or {})
        self.outcome = Outcome()
        memory_dry_run, memory_guard = memory if memory is not None else (settings.dry_run, guard)
        self.memory = Writer(api, memory_dry_run, self.outcome, guard=memory_guard)
        self.writer = Writer(api, settings.dry_run, self.outcome, guard=guard, live_pause=live_pause)
        self.events = EventRecorder(self.writer, now)
        self.records = TaintRecords(api, self.writer, settings.recovery_namespace)
        self.live = Rechecker(api, settings, self.writer, outcome=self.outcome, now=now,
                              on_split_brain=lambda verdict: self.warn_split_brain((verdict,)), records=self.records,
                              sightings=sightings)
        self.fencer = Fencer(api, settings, self.writer, events=self.events, outcome=self.outcome, sleep=api.sleep,
                             read_live=self.live.read_live, now=now)
        self.recovery = RecoveryTracker(self.writer, self.events, metrics, now=now,
                                        namespace=settings.recovery_namespace)
        self.taint = OurTaint(api, settings, self.writer, events=self.events, outcome=self.outcome, live=self.live,
                              records=self.records, power=self.fencer.power, node_uids=self.node_uids, now=now)

    def warn_split_brain(self, verdicts: tuple[NodeVerdict, ...]) -> None:
        for verdict in verdicts:
            self.outcome.split_brain.append(verdict.node)
            log.error("refusing node: tainted for shutdown but alive", extra={"node": verdict.node,
                      "taint": verdict.taint, "reason": verdict.reason})
            self.events.repeated(verdict.node, self.node_uids.get(verdict.node, ""), Reason.ShutdownTaintOnLiveNode,
                                 message=f"{verdict.reason}; rwo-failover will not touch this node. "
                                 f"Check the taint {verdict.taint}.")

    def warn_unjudged(self, plan: Plan) -> None:
        """A node that cannot be judged on the server's clock (no stamp, clocks that disagree) is never failed
        over: one Warning on it says why, however many passes see it, where a human looks first."""
        for verdict in (v for v in plan.verdicts if v.unjudged):
            self.events.repeated(verdict.node, self.node_uids.get(verdict.node, ""), Reason.NodeNotJudged,
                                 message=f"{verdict.unjudged}; rwo-failover will not act on this node until it can be "
                                 "judged")

    def warn_unreadable(self, unreadable: tuple[Unreadable, ...], plan: Plan) -> None:
        """What could not be read and keeps a node from being judged or acted on: one Warning on that node,
        however many passes see it. Other unreadable objects are skip lines only."""
        why: dict[str, list[str]] = {}
        for item in unreadable:
            node = item.node or (item.name if item.kind in ("node", "lease", "networkfence") else "")
            if node and node != "(no name)":
                why.setdefault(node, []).append(f"{item.kind} {item.name} cannot be read ({item.reason})")
        for node_plan in plan.nodes:
            if node_plan.blocked and node_plan.verdict.node not in why:
                why[node_plan.verdict.node] = [node_plan.blocked]
        for node, reasons in sorted(why.items()):
            self.events.repeated(node, self.node_uids.get(node, ""), Reason.UnreadableObject,
                                 message=f"{'; '.join(reasons)}; rwo-failover will not act on this node because of it")

    def warn_ignored(self, plan: Plan) -> None:
        """Tenant objects the brakes did not count (planner/evidence.py): said once a pass, in one Warning on the
        first node they name, bumped rather than repeated, its list bounded however many there are."""
        if not plan.ignored:
            return
        node = min(node for node, _ in plan.ignored)
        listed = bounded_list([what for _, what in plan.ignored])
        log.warning("not counted by the brakes: tied to their proven-down nodes by nothing a tenant cannot write",
                    extra={"count": len(plan.ignored), "objects": listed})
        self.events.repeated(node, self.node_uids.get(node, ""), Reason.NotCountedByBrakes,
                             message=f"{len(plan.ignored)} tenant objects on proven-down nodes are not counted toward "
                             "MAX_NODES_PER_PASS or MAX_UNHEALTHY_FRACTION: nothing from before their node went "
                             "down (a VolumeAttachment made while it was alive, a pod its kubelet ran) "
                             f"ties them to it, and any tenant can make such objects: {listed}")

    def remember(self, plan: Plan) -> None:
        """What the pass remembers whatever else it may do (paused, refused): our record of each standing taint on
        a node not Ready names the machine as it is now (planner.taint.machines_now)."""
        records = TaintRecords(self.api, self.memory, self.settings.recovery_namespace)
        for record in plan.rerecord:
            records.rewrite(record)
        for name, boot, version in plan.refence:
            record_machine(self.memory, name, boot=boot, version=version)

    def record_refusal(self, plan: Plan) -> None:
        # One Event per down node that has work, capped, so a mass outage does not become an Event storm;
        # with the unhealthy-fraction brake no node was planned, so every down node is named (capped), and every
        # node down by the server's stamps that only this process's own sighting holds back (a new process's).
        if plan.storm_mark is not None:  # first: the cool-down's memory matters more than the Events
            record_storm(self.memory, self.settings, plan.storm_mark)
        # The cool-down has its own reason: its message (when it resumes) must not be hidden under a brake's.
        busy = [n.verdict for n in plan.busy_nodes] or [v for v in plan.verdicts if v.state is NodeState.DOWN]
        named = {v.node for v in busy}
        busy += [v for v in plan.verdicts if v.state is NodeState.NOT_YET and v.sighting_pending
                 and v.node not in named]
        cooling = plan.refusal is not None and plan.refusal.kind is RefusalKind.STORM_COOLDOWN
        reason = Reason.StormCooldown if cooling else Reason.FailoverRefused
        for verdict in busy[: self.settings.max_nodes_per_pass]:
            self.events.repeated(verdict.node, self.node_uids.get(verdict.node, ""), reason,
                                 message=f"{plan.refusal}; nothing was deleted")

    def execute(self, plan: Plan) -> Outcome:
        plan.raise_if_unsafe()
        for node_plan in plan.nodes:
            if node_plan.has_work:
                self._act_on_node(node_plan)
        for name in plan.untaint:
            self.taint.remove(name)
        for record in plan.stale_records:
            self.taint.drop(record)
        for name, why in plan.taint_kept:  # comes back every pass until a human acts: one Warning, bumped
            self.events.repeated(name, self.node_uids.get(name, ""), Reason.OutOfServiceTaintKept,
                                 message=f"{why}; rwo-failover will not remove it. {UNDO_HOW[self.settings.undo]}, or "
                                 "remove the taint by hand once nothing there can still write to the volumes it "
                                 "released (docs/fencing.md)")
        for name, step in plan.unfence:
            self.fencer.unfence(name, step)
        for name, _kind, why in plan.fences_held:
            self.fencer.leave_in_place(name, self.node_uids.get(name, ""), why)
        for verdict in plan.recovery:
            self.recovery.settle(verdict)
        return self.outcome

    def _act_on_node(self, node_plan: NodePlan) -> None:
        name, verdict = node_plan.verdict.node, node_plan.verdict
        live = self.live.confirm_down(node_plan)
        if live is not None:
            self.node_uids[name] = live[0].uid
        if live is None or not self.fencer.ensure(node_plan, live[0]):
            return  # not down any more, or fencing not confirmed: no pod, no attachment, no taint
        would = False  # a dry run's taint: never on the node, yet what a real pass would have put there
        # FENCING=redfish confirms a node only on its BMC's Off, in this pass: recorded with our taint (UNDO=bmc).
        off_at = self.events.stamp() if self.settings.fencing == "redfish" else ""
        if node_plan.add_taint and (live := self.live.confirm_down(node_plan)) is not None:
            # First, so the attach-detach controller force-detaches the moment each pod is gone.
            would = self.taint.add(node_plan, live[1], off_at) and self.settings.dry_run
        elif not self.taint.refresh(node_plan, off_at):
            return  # our taint of an earlier outage, whose record cannot be made to name this machine: no release
        held: list[str] = []
        gone = {p.key for p in node_plan.pods if self.live.confirm_down(node_plan) and
                self._delete_pod(node_plan, p, held)}
        released = [a for a in node_plan.attachments if self._releasable(a, gone) and
                    self._tainted_live(node_plan, a, would) and self._release(node_plan, a)]
        uid = self.node_uids.get(name, "")
        if held:  # comes back every pass until a human acts: one Warning, bumped, never an Event per pass
            self.events.repeated(name, uid, Reason.PodsHeldByFinalizers,
                                 message=f"{'; '.join(held)}; their volumes stay attached until the finalizers are "
                                 "removed")
        if gone or released:  # only what happened: a pass that released nothing says nothing here
            self.events.node(name, uid, "Normal", reason=Reason.RWOVolumesReleased,
                             message=f"node proven down ({verdict.reason}, taint {verdict.taint}); force-deleted "
                             f"{', '.join(sorted(gone)) or 'no pods'}; deleted "
                             f"{', '.join(a.name for a in released) or 'no VolumeAttachments'}")

    def _tainted_live(self, node_plan: NodePlan, action: AttachmentAction, would: bool) -> bool:
        """The live re-check before releasing an attachment, and, with the handoff on, the out-of-service taint
        read back on the node: ceph-csi (3.15+) blocklists the node's clients in ControllerUnpublishVolume only
        if the node carries the taint at that moment, so an attachment released before it skips the fencing."""
        live = self.live.confirm_down(node_plan)
        if live is None or not node_plan.taint_first or live[0].has_oos_taint or would:
            return live is not None
        self.outcome.attachments_held.append(action.name)
        self.writer.fail(f"VolumeAttachment {action.name} on node {action.node} kept: the out-of-service taint is "
                         "not on the node as read now, and storage that fences on it (ceph-csi) would skip fencing "
                         "if it were released; the next pass tries again")
        return False

    def _delete_pod(self, node_plan: NodePlan, action: PodAction, held: list[str]) -> bool:
        """True when the pod we inspected is gone (or would be, in a dry run). Its recovery record is written first
        (write-ahead, see recovery.py), so nothing that befalls the delete can lose it."""
        fields = {"pod": action.key, "uid": action.uid, "node": action.node, "reason": action.reason,
                  "claims": list(action.claims)}
        self.recovery.mark(action, node_plan.verdict.not_ready_since)
        with self.live.on_every_retry(node_plan):
            result = self.writer.delete_pod(action.namespace, action.name, action.uid, fields=fields)
        if result is Result.WOULD:
            return True
        if result is Result.CONFLICT:
            log.warning("pod was replaced since it was inspected (UID differs); left alone", extra=fields)
        if result is Result.HELD:
            # Still there: the attach-detach controller would re-create any attachment we delete now.
            finalizers = ", ".join(self.writer.held_by)
            held.append(f"pod {action.key} is held by finalizers {finalizers}")
            self.writer.fail(f"pod {action.key} is held by finalizers {finalizers}; its volumes stay "
                             "attached until they are removed")
            return False
        if result not in (Result.DONE, Result.GONE):
            return False
        log.info("force-deleted pod" if result is Result.DONE else "pod already gone", extra=fields)
        self.events.pod(action.namespace, action.name, action.uid, reason=Reason.ForceDeletedFromDeadNode,
                        message=f"{action.reason}; force-deleted by rwo-failover to release {', '.join(action.claims)}")
        return True

    @staticmethod
    def _fields(action: AttachmentAction) -> dict[str, str]:
        return {"volumeattachment": action.name, "node": action.node, "pv": action.volume, "claim": action.claim}

    def _releasable(self, action: AttachmentAction, gone: set[str]) -> bool:
        waiting = sorted(set(action.after_pods) - gone)
        if waiting:
            self.outcome.attachments_held.append(action.name)
            log.warning("VolumeAttachment kept: its pod is not gone, and the controller would re-create it",
                        extra=dict(self._fields(action), waiting_for=waiting))
        return not waiting

    def _release(self, node_plan: NodePlan, action: AttachmentAction) -> bool:
        fields = self._fields(action)
        with self.live.on_every_retry(node_plan):
            result = self.writer.delete_attachment(action.name, action.uid, fields)
        if result is Result.WOULD:
            return True
        if result is Result.CONFLICT:
            log.warning("VolumeAttachment was made again since it was inspected (UID differs); left for the next "
                        "pass to judge", extra=fields)
        if result not in (Result.DONE, Result.GONE):
            return False
        log.info("deleted VolumeAttachment" if result is Result.DONE else "VolumeAttachment already gone",
                 extra=fields)
        self.events.claim(action.claim, action.claim_uid, Reason.VolumeReleasedFromDeadNode,
                          message=f"deleted VolumeAttachment {action.name} of PV {action.volume} on dead node "
                          f"{action.node}")
        return True
