"""Carrying out fencing steps: NetworkFence objects (csi-addons), the fence webhook, or a BMC's PowerState Off
(FENCING=redfish, act/power.py), through the writer.

The rules (when to fence, when to unfence) are in planner/fencing.py; this module does what they decide, and
before each unfencing step it reads the node, its Lease and the fence again, live, and judges them with the
same rule: the plan's snapshot may be seconds old, and an unfence of a node that died again meanwhile would
hand its storage back to a node that may still write.

Every write to a NetworkFence is preconditioned on the object judged: a create on there being none, a patch on
its resourceVersion, a delete on its uid and resourceVersion. A 409 means someone changed it since: it is read
again and judged again from scratch, and written at most once more, never retried blindly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from ..kube import Api, ApiError
from ..model import (
    FENCE_ASKED_ANNOTATION,
    FENCE_LABEL,
    BadObject,
    Fence,
    Json,
    Lease,
    Machine,
    Node,
    bounded_list,
    fence_asked,
)
from ..model.event_reasons import Reason
from ..planner import unfence_step
from ..planner.fencing import DELETE, FAILED, PENDING, RECREATE, REQUEST, UNFENCE, cidrs, judge_fence
from ..planner.types import NodePlan
from ..settings import Settings
from . import fence_webhook
from .events import EventRecorder
from .fence_machine import at_this_release
from .outcome import Outcome
from .power import KEEP_FOR_ACTING, PowerWitness
from .writer import Result, Writer

log = logging.getLogger(__name__)
NETWORK_FENCE_API = "csiaddons.openshift.io/v1alpha1"
# The node, its Lease and its raw JSON, read now; None once the failure to read them is recorded.
ReadLive = Callable[[str, str], tuple[Node, Lease | None, Json] | None]
# While a pass waits for a NetworkFence's answer it reads the fence this often, and stops waiting once only
# KEEP_FOR_ACTING of the pass deadline is left: fencing then costs the controller's few seconds, never a CronJob
# interval.
ANSWER_POLL_SECONDS = 1.0


class Fencer:
    def __init__(self, api: Api, settings: Settings, writer: Writer, *, events: EventRecorder, outcome: Outcome,
                 sleep: Callable[[float], None], read_live: ReadLive, now: Callable[[], datetime]) -> None:
        self.api, self.settings, self.writer, self.events = api, settings, writer, events
        self.outcome, self.sleep, self.read_live, self.now = outcome, sleep, read_live, now
        self.power = PowerWitness(api, settings, writer, events=events, outcome=outcome, sleep=sleep)

    def ensure(self, node_plan: NodePlan, node: Node) -> bool:
        """True when the node is confirmed fenced now, so its pods, attachments and taint may be touched."""
        step = node_plan.fence
        if step is None:  # fenced when the plan looked: judged again now, on the node as just read
            return self.settings.fencing != "networkfence" or self._still_fenced(node)
        if step == PENDING:
            return self._await_answer(node, node_plan.fence_reason)
        if step == REQUEST:
            if self.settings.fencing == "redfish":
                return self._redfish(node, node_plan.machine_seen, node_plan.verdict.sighting_pending)
            return self._webhook(node_plan, node) if self.settings.fencing == "webhook" else self._request(node)
        if step == RECREATE:
            return self._recreate(node, *node_plan.fence_seen)
        assert step == FAILED, step
        self._refuse(node, node_plan.fence_reason)
        return False

    def _refuse(self, node: Node, why: str) -> None:
        """Fencing not confirmed: a failure of the pass, and one Warning however many passes see it."""
        self.writer.fail(f"fencing of node {node.name} not confirmed: {why}; nothing on it was touched")
        self.events.repeated(node.name, node.uid, Reason.FencingFailed,
                             message=f"{why}; rwo-failover touched nothing on this node")

    def _webhook(self, node_plan: NodePlan, node: Node) -> bool:
        payload = {"node": node.name, "uid": node.uid, "providerID": node.provider_id,
                   "addresses": list(node.internal_ips), "taint": node_plan.verdict.taint,
                   "reason": node_plan.verdict.reason}
        result, why = self.writer.call_fence_webhook(node.name, lambda stopped: fence_webhook.fence(
            payload, self.settings, self.api.remaining, sleep=self.sleep, stopped=stopped))
        if result in (Result.DONE, Result.WOULD):
            self.outcome.fenced.append(node.name)
            log.info("fence webhook confirmed the node fenced", extra={"node": node.name})
            return True
        if result is Result.FAILED:
            self.events.repeated(node.name, node.uid, Reason.FencingFailed,
                                 message=f"fence webhook did not confirm: {why}; rwo-failover touched nothing on this "
                                 "node")
        return False

    def _redfish(self, node: Node, judged: tuple[str, str, str], hold_power_off: bool) -> bool:
        """Proven down only when its BMC answers PowerState Off, in this pass; otherwise nothing is touched.
        `hold_power_off`: this process has not watched its Lease a renewal interval yet, so a machine On stays On."""
        why = self.power.prove_off(node, judged, hold_power_off=hold_power_off)
        if why is None:
            self.outcome.fenced.append(node.name)
            log.info("its BMC answers PowerState Off: proven down", extra={"node": node.name})
            return True
        if why:
            self._refuse(node, f"not proven down: {why}")
        return False

    def _request(self, node: Node) -> bool:
        """Create our NetworkFence, recording the machine it is for; the answer comes in a later pass."""
        wanted = cidrs(node)[0]  # the planner refused a node without usable addresses
        body = {"apiVersion": NETWORK_FENCE_API, "kind": "NetworkFence",
                "metadata": {"name": node.name, "labels": {FENCE_LABEL: "rwo-failover"},
                             "annotations": Machine.of(node.uid, node.boot_id, wanted).notes()},
                "spec": {"fenceState": "Fenced", "networkFenceClassName": self.settings.network_fence_class,
                         "cidrs": list(wanted)}}
        result = self.writer.create_networkfence(node.name, body)
        if result is Result.WOULD:
            return True
        if result is Result.CONFLICT:  # one exists since we looked (or our own, whose answer was lost): judge it
            return self._rejudge(node, "our create found one under the name", recreate=False)
        if result is not Result.DONE:
            self.outcome.fencing_pending.append(node.name)
            return False
        log.info("asked for fencing; nothing on the node is touched until the NetworkFence answers Succeeded",
                 extra={"node": node.name, "cidrs": bounded_list(wanted)})
        self.events.node(node.name, node.uid, "Normal", reason=Reason.FencingRequested,
                         message=f"created NetworkFence {node.name} for {bounded_list(wanted)}")
        return self._await_answer(node, "asked; no answer yet")

    def _rejudge(self, node: Node, why: str, recreate: bool) -> bool:
        """A write found the fence changed (409): read it again and judge it from scratch, as the plan would.
        True only when it answers fenced (now, or while this pass waits for the answer of one not answered yet);
        a RECREATE is carried out (once) only with `recreate`."""
        log.info(f"NetworkFence changed since it was read ({why}); judging it again", extra={"node": node.name})
        wanted, refused = cidrs(node)
        fence = self._read_fence(node.name, "after a conflict", anyone=True) if not refused else None
        if fence is None:
            if refused:
                self._refuse(node, refused)
            else:
                self.outcome.fencing_pending.append(node.name)
            return False
        step, why = judge_fence(node, fence, wanted)
        if step is None:
            return True
        if step == PENDING:
            return self._await_answer(node, why)
        if step == FAILED:
            self._refuse(node, why)
        elif step == RECREATE and recreate:
            return self._recreate(node, fence.uid, fence.version, again=True)
        else:
            self.outcome.fencing_pending.append(node.name)
        return False

    def _still_fenced(self, node: Node) -> bool:
        """Our fence, read now, still fences this node as read now (its addresses may have changed since the
        plan): True only when it does; otherwise the refusal is recorded, and nothing on the node is touched."""
        wanted, why = cidrs(node)
        found = self._read_fence(node.name, "before acting on its answer") if not why else None
        if found is not None:
            step, why = judge_fence(node, found, wanted)
            if step is None:
                return at_this_release(self.writer, node, found)
        if why:
            self._refuse(node, why)
        return False

    def _await_answer(self, node: Node, why: str) -> bool:
        """Wait within this pass for our fence's answer, reading it live and judging it by the plan's rule, so a
        CronJob pass acts on the answer instead of leaving it to the next pass. True once it answered fenced;
        False (pending, or failed and recorded) otherwise."""
        wanted = cidrs(node)[0]
        reserve = self.settings.pass_timeout_seconds * KEEP_FOR_ACTING
        for _ in range(int(max(0.0, self.api.remaining() - reserve) / ANSWER_POLL_SECONDS)):
            self.sleep(ANSWER_POLL_SECONDS)
            found = self._read_fence(node.name, "waiting for its answer")
            if found is None:
                return False
            step, why = judge_fence(node, found, wanted)
            if step is None:
                log.info("NetworkFence answered Succeeded; acting in this pass", extra={"node": node.name})
                return True
            if step == FAILED:
                self._refuse(node, why)
                return False
            if step != PENDING:
                break
        self.outcome.fencing_pending.append(node.name)
        log.info("fencing pending; nothing on the node is touched until it is confirmed",
                 extra={"node": node.name, "reason": why})
        return False

    def _recreate(self, node: Node, uid: str, version: str, *, again: bool = False) -> bool:
        """Our fence is Unfenced from an earlier recovery and the node is down again. Setting it back to Fenced
        would leave the unfencing's Succeeded in place until the controller answers, and a controller that sets
        no observedGeneration gives no way to tell the two apart: delete it, and create a new one next pass.
        The delete is preconditioned on the fence judged: one set back to Fenced since, or replaced, is deleted
        never (csi-addons would unfence the node); it is judged again instead."""
        if self.writer.dry_run:
            return True
        result = self.writer.delete_networkfence(node.name, uid, version)
        if result is Result.CONFLICT and not again:
            return self._rejudge(node, "the recreate's delete", recreate=True)
        self.outcome.fencing_pending.append(node.name)
        if result in (Result.DONE, Result.GONE):
            log.info("our Unfenced NetworkFence deleted; a new one is created next pass", extra={"node": node.name})
        return False

    def unfence(self, name: str, planned: str) -> bool:
        """Carry out `planned` (UNFENCE or DELETE) if a live re-read still calls for it. True when the fence is
        gone (unfenced and deleted), so our taint may come off. A 409 (the fence changed since the read) is read
        and judged again, and written once more only if the fresh object still calls for the same step."""
        for _ in range(2):
            judged = self._judge_unfence(name, planned)
            if judged is None:
                return False
            result = self._unfence_write(name, planned, judged[1])
            if result is not Result.CONFLICT:
                if planned == DELETE and result in (Result.DONE, Result.GONE):
                    self.outcome.unfenced.append(name)
                    self.events.node(name, judged[0].uid, "Normal", reason=Reason.NodeUnfenced,
                                     message=f"NetworkFence {name} answered Unfenced; deleted it")
                    return True
                if result is Result.DONE:
                    log.info("node is back: asked to unfence", extra={"node": name})
                return False
            log.info("NetworkFence changed since it was read; judging it again", extra={"node": name})
        return False

    def leave_in_place(self, name: str, uid: str, why: str) -> None:
        """A fence of ours the node is back from, that is not ours to lift for it: one Warning for a human,
        bumped, however many passes see it (the plan's skip line says it each pass, and the metric counts it)."""
        self.events.repeated(name, uid, Reason.FenceLeftInPlace, message=why)

    def _judge_unfence(self, name: str, planned: str) -> tuple[Node, Fence] | None:
        """The node and the fence read now, when the rule still calls for `planned` on them."""
        live = self.read_live(name, "re-check before unfencing")
        fence = self._read_fence(name)
        if live is None or fence is None:
            return None
        node, lease, _raw = live
        step, why = unfence_step(node, lease, fence, settings=self.settings, now=self.now())
        if step != planned:
            log.info("not unfencing: the live re-read no longer calls for it",
                     extra={"node": name, "planned": planned, "now": step or "", "reason": why or ""})
            return None
        return node, fence

    def _unfence_write(self, name: str, planned: str, fence: Fence) -> Result:
        if planned == UNFENCE:
            patch = {"metadata": {"resourceVersion": fence.version, "annotations": {
                FENCE_ASKED_ANNOTATION: fence_asked(fence.generation + 1, fence.status)}},
                "spec": {"fenceState": "Unfenced"}}
            return self.writer.patch_networkfence(name, patch, "unfence")
        return self.writer.delete_networkfence(name, fence.uid, fence.version)

    def _read_fence(self, name: str, purpose: str = "before unfencing", anyone: bool = False) -> Fence | None:
        """The fence read now (its uid and resourceVersion are what each write is preconditioned on); None once
        the failure is recorded, or when it is gone. Unless `anyone`, one that is not ours is a failure."""
        try:
            raw = self.api.read_networkfence(name)
            if raw is None:
                log.info(f"NetworkFence gone {purpose}; nothing to do", extra={"node": name})
                return None
            fence = Fence.from_json(raw)
        except ApiError as err:
            self.writer.fail(f"re-reading NetworkFence {name} {purpose} failed: {err}", err)
            return None
        except (BadObject, AttributeError) as err:
            self.writer.fail(f"NetworkFence {name} cannot be read {purpose}: {err}")
            return None
        if not fence.ours and not anyone:
            self.writer.fail(f"NetworkFence {name} is no longer ours; not touching it")
            return None
        return fence
