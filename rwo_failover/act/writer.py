"""The one writer: every change a pass makes to the cluster goes through `Writer`.

It is the only place that checks dry-run (and logs what it would do instead), that
refuses a new write once the pass deadline has passed or its guard names a reason
(a stop signal, leadership lost), and that records each write's outcome. The guard
is asked before every attempt, retries included. Reads stay with `client.Api`; act
decides what to write and when.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from ..kube import Api, ApiError, Forbidden, Unavailable, WriteStopped
from ..model import BadObject, Json, obj_at, text_at, texts_at
from .outcome import Outcome

log = logging.getLogger(__name__)
# Why no write may start now (a stop signal, leadership lost); None while writes may go on.
Guard = Callable[[], str | None]


class Result(StrEnum):
    DONE = "done"                    # the write landed
    GONE = "gone"                    # a delete found nothing (404): someone else finished it
    HELD = "held"                    # a delete was accepted, but finalizers keep the object
    CONFLICT = "conflict"            # 409: a precondition (UID or resourceVersion) no longer holds
    FAILED = "failed"                # an error, recorded in the outcome
    UNCONFIRMED = "unconfirmed"      # sent, but no answer came (reset, timeout): it may have landed
    WOULD = "would"                  # dry-run: logged, not made
    NOT_ATTEMPTED = "not-attempted"  # the pass deadline had passed; recorded in the outcome


class Writer:
    def __init__(self, api: Api, dry_run: bool, outcome: Outcome, *, guard: Guard | None = None,
                 live_pause: Guard | None = None) -> None:
        """`guard` is asked before every write attempt; `live_pause` (the pause switch read live) before every
        destructive one too: a fence, a power-off, a taint, a pod or attachment delete."""
        self.api, self.dry_run, self.outcome, self.guard, self.live_pause = api, dry_run, outcome, guard, live_pause
        self.body: Json | None = None  # the response body of the last write that landed
        self.held_by: tuple[str, ...] = ()  # the finalizers the last pod delete's answer named
        api.write_guard = self.stopped

    def stopped(self) -> str | None:
        """Why no write may start now; None while writes may go on."""
        if self.api.remaining() <= 0:
            return "the pass deadline (PASS_TIMEOUT_SECONDS) has passed"
        return self.guard() if self.guard else None

    def stopped_destructive(self) -> str | None:
        """stopped(), or the pause switch read live now (set, perhaps, during a wait for a BMC's Off or a fence)."""
        return self.stopped() or (self.live_pause() if self.live_pause else None)

    def delete_pod(self, namespace: str, name: str, uid: str, *, fields: Json) -> Result:
        """Force-delete (grace 0) the pod with this UID; 409 when it was replaced since it was read. HELD, with
        `held_by`, when finalizers keep it; UNCONFIRMED when the answer cannot say whether any do."""
        key = f"{namespace}/{name}"
        what = f"force-delete of pod {key}"
        result = self._landed(self._write(what, "would force-delete pod", fields,
                                          call=lambda: self.api.delete_pod(namespace, name, uid), conflict_ok=True,
                                          destructive=True),
                              what, fields, uid=uid, read=lambda: self.api.read_pod(namespace, name))
        if result is Result.DONE:
            result = self._finalizers(what, fields)
        if result is Result.DONE:
            self.outcome.pods_deleted.append(key)
        elif result is Result.GONE:
            self.outcome.pods_gone.append(key)
        elif result is Result.CONFLICT:
            self.outcome.pods_replaced.append(key)
        return result

    def delete_attachment(self, name: str, uid: str, fields: Json) -> Result:
        what = f"delete of VolumeAttachment {name}"
        result = self._landed(self._write(what, "would delete VolumeAttachment", fields,
                                          call=lambda: self.api.delete_attachment(name, uid), conflict_ok=True,
                                          destructive=True),
                              what, fields, uid=uid, read=lambda: self.api.find_attachment(name))
        if result is Result.DONE:
            self.outcome.attachments_deleted.append(name)
        elif result is Result.GONE:
            self.outcome.attachments_gone.append(name)
        elif result is Result.CONFLICT:
            self.outcome.attachments_replaced.append(name)
        return result

    def _finalizers(self, what: str, fields: Json) -> Result:
        """A delete landed: HELD when its answer names finalizers (kept in `held_by`), DONE when it names none,
        UNCONFIRMED when its metadata or finalizers are of another shape: the pod may still be there."""
        try:
            self.held_by = texts_at(obj_at(self.body or {}, "metadata"), "finalizers")
        except BadObject as err:
            self.outcome.unconfirmed.append(what)
            log.error("unconfirmed: the delete landed, but its answer cannot say whether finalizers hold the pod",
                      extra=dict(fields, write=what, error=str(err)))
            return Result.UNCONFIRMED
        return Result.HELD if self.held_by else Result.DONE

    def _landed(self, result: Result, what: str, fields: Json, *, uid: str, read: Callable[[], Json | None]) -> Result:
        """A delete that found nothing (404) after an attempt whose answer was lost: that attempt landed (or someone
        finished the same delete in between); the object inspected is gone as asked, so it counts as done. A 409
        then proves nothing by itself (an admission webhook answers 409 too, and so does a precondition no object
        meets): the name is read again (`read`), and it counts as done only when nothing, or an object with
        another uid, has it now; the object judged still there is a failure, and an unreadable answer unconfirmed."""
        if result not in (Result.GONE, Result.CONFLICT) or not self.api.call_unanswered:
            return result
        if result is Result.CONFLICT:
            try:
                found = read()
            except ApiError as err:
                self.outcome.unconfirmed.append(what)
                log.error("unconfirmed: a retry after a lost answer got 409, and the object cannot be read again",
                          extra=dict(fields, write=what, error=str(err)))
                return Result.UNCONFIRMED
            now = None if found is None else _uid_of(found)
            if not uid or (now is not None and (not now or now == uid)):  # "" named no object: nothing of ours landed
                self.fail(f"{what} failed: a retry after a lost answer got 409, and the object judged "
                          f"(uid {uid or 'none'}) is still there")
                return Result.FAILED
        log.info("the delete landed; its answer was lost, and the retry found the object gone")
        self.body = None  # no answer of its own came: never read an earlier write's answer as this delete's
        return Result.DONE

    def patch_node(self, name: str, patch: dict[str, Any], purpose: str) -> Result:
        """A resourceVersion-preconditioned merge patch to `purpose`; CONFLICT tells the caller to read again."""
        return self._write(f"patching node {name} to {purpose}", f"would {purpose}", {"node": name},
                           call=lambda: self.api.patch_node(name, patch), conflict_ok=True, destructive=True)

    def create_event(self, namespace: str, event: dict[str, Any], repeat: bool = False) -> Result:
        """Events have deterministic names (events.build_event), so a retry after a lost answer gets 409:
        the Event is there, and counts as done. With `repeat`, a 409 is returned as CONFLICT: the caller
        bumps the existing Event instead."""
        involved = event.get("involvedObject") or {}
        what = f"recording {event.get('reason')} Event on {involved.get('kind')} {involved.get('name')}"
        result = self._write(what, "would record Event", {"reason": event.get("reason")},
                             call=lambda: self.api.create_event(namespace, event), conflict_ok=True, quiet_dry_run=True)
        if result is Result.CONFLICT and not repeat:
            result = Result.DONE
        if result is Result.DONE:
            self.outcome.events += 1
        return result

    def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> Result:
        result = self._write(f"bumping Event {namespace}/{name}", "would bump a repeated Event", {"event": name},
                             call=lambda: self.api.patch_event(namespace, name, patch), conflict_ok=True)
        if result is Result.DONE:
            self.outcome.events += 1
        return result

    def create_recovery_record(self, namespace: str, body: dict[str, Any]) -> Result:
        """CONFLICT when a record of that name exists (an earlier freeing of the same claim)."""
        name = body["metadata"]["name"]
        return self._write(f"creating recovery record {namespace}/{name}", "would record the pod we freed",
                           {"record": name}, call=lambda: self.api.create_recovery_record(namespace, body),
                           conflict_ok=True)

    def patch_recovery_record(self, namespace: str, name: str, patch: dict[str, Any]) -> Result:
        return self._write(f"replacing recovery record {namespace}/{name}", "would record the pod we freed",
                           {"record": name}, call=lambda: self.api.patch_recovery_record(namespace, name, patch))

    def delete_recovery_record(self, namespace: str, name: str) -> Result:
        return self._write(f"deleting recovery record {namespace}/{name}", "would settle the recovery record",
                           {"record": name}, call=lambda: self.api.delete_recovery_record(namespace, name))

    def record(self, what: str, would: str, name: str, *, call: Callable[[], Json | None]) -> Result:
        """A write of one of our records (act/taint_records.py); CONFLICT on a 409 (it exists, or changed)."""
        return self._write(what, would, {"record": name}, call=call, conflict_ok=True)

    def create_control(self, namespace: str, body: dict[str, Any]) -> Result:
        """CONFLICT when someone created the control ConfigMap since this pass read it."""
        return self._write(f"creating ConfigMap {namespace}/{body['metadata']['name']}", "would record a storm moment",
                           {"storm": sorted(body.get("data") or {})},
                           call=lambda: self.api.create_control(namespace, body), conflict_ok=True)

    def patch_control(self, namespace: str, name: str, patch: dict[str, Any]) -> Result:
        """Preconditioned on the resourceVersion in `patch`: CONFLICT when it changed since it was read."""
        return self._write(f"patching ConfigMap {namespace}/{name}", "would record a storm moment",
                           {"storm": sorted(patch.get("data") or {})},
                           call=lambda: self.api.patch_control(namespace, name, patch), conflict_ok=True)

    def create_networkfence(self, name: str, body: dict[str, Any]) -> Result:
        return self._write(f"creating NetworkFence {name}", "would create NetworkFence", {"networkfence": name},
                           call=lambda: self.api.create_networkfence(body), conflict_ok=True, destructive=True)

    def patch_networkfence(self, name: str, patch: dict[str, Any], purpose: str) -> Result:
        return self._write(f"patching NetworkFence {name} to {purpose}", f"would {purpose}", {"networkfence": name},
                           call=lambda: self.api.patch_networkfence(name, patch), conflict_ok=True, destructive=True)

    def delete_networkfence(self, name: str, uid: str, resource_version: str) -> Result:
        """CONFLICT when the fence changed, or was replaced, since it was read."""
        return self._write(f"deleting NetworkFence {name}", "would delete NetworkFence", {"networkfence": name},
                           call=lambda: self.api.delete_networkfence(name, uid, resource_version), conflict_ok=True,
                           destructive=True)

    def call_fence_webhook(self, node: str, call: Callable[[Guard], tuple[bool, str]]) -> tuple[Result, str]:
        """The webhook is a write too: dry-run logs it, the deadline and the guard refuse it, and `call` gets
        `stopped` to ask before every attempt, retries included (it raises WriteStopped, as Api.call does).
        (DONE, "") when it answered fenced; (FAILED, why) otherwise, recorded as a failure; UNCONFIRMED when
        stopped after an attempt that got no answer (the fencer may have fenced)."""
        what = f"fence webhook for node {node}"
        refused = self._outside_call_gate(what, "would call the fence webhook", node)
        if refused:
            return refused
        try:
            fenced, why = call(self.stopped_destructive)  # each retry is a fence sent: the pause, read live
        except WriteStopped as err:
            return self._stopped_mid_call(what, err, {"node": node}), str(err)
        if fenced:
            return Result.DONE, ""
        self.fail(f"fence webhook did not confirm node {node} fenced: {why}")
        return Result.FAILED, why

    def power_off(self, node: str, call: Callable[[], tuple[bool, str]]) -> tuple[Result, str]:
        """A BMC's ForceOff, through the writes' gate: (DONE, "") when the BMC accepted it; (FAILED, why) if not."""
        what = f"power-off of node {node} through its BMC"
        refused = self._outside_call_gate(what, "would power off the node through its BMC (Redfish ForceOff)", node)
        if refused:
            return refused
        done, why = call()
        return (Result.DONE, "") if done else (Result.FAILED, why)

    def _outside_call_gate(self, what: str, would: str, node: str) -> tuple[Result, str] | None:
        """A fencer's or a BMC's call, first: WOULD in a dry run, NOT_ATTEMPTED when refused; None: make it."""
        if self.dry_run:
            log.info(f"dry-run: {would}", extra={"node": node})
            return Result.WOULD, ""
        stopped = self.stopped_destructive()
        if stopped:
            self._not_attempted(what, stopped, {"node": node})
            return Result.NOT_ATTEMPTED, stopped
        return None

    def _not_attempted(self, what: str, why: str, fields: Json) -> None:
        self.outcome.not_attempted.append(f"{what} ({why})")
        log.error(f"not attempted: {why}", extra=dict(fields, write=what))

    def _stopped_mid_call(self, what: str, err: WriteStopped, fields: Json) -> Result:
        """The guard stopped the retries of a write already sent: what the earlier attempts leave behind."""
        if err.unanswered:
            self.outcome.unconfirmed.append(what)
            log.error("unconfirmed: an attempt got no answer, and no retry may be sent",
                      extra=dict(fields, write=what, reason=str(err)))
            return Result.UNCONFIRMED
        if err.attempts:
            self.fail(f"{what} failed, and no retry may be sent: {err}")
            return Result.FAILED
        self._not_attempted(what, str(err), fields)
        return Result.NOT_ATTEMPTED

    def fail(self, message: str, err: ApiError | None = None) -> None:
        """Record a failure that is not a write error (a finalizer, a node that keeps changing)."""
        (self.outcome.forbidden if isinstance(err, Forbidden) else self.outcome.failures).append(message)
        log.error(message)

    def _write(self, what: str, would: str, fields: Json, *, call: Callable[[], Json | None],
               conflict_ok: bool = False, quiet_dry_run: bool = False, destructive: bool = False) -> Result:
        if self.dry_run:
            log.log(logging.DEBUG if quiet_dry_run else logging.INFO, f"dry-run: {would}", extra=fields)
            return Result.WOULD
        stopped = self.stopped_destructive() if destructive else self.stopped()
        if stopped:
            self._not_attempted(what, stopped, fields)
            return Result.NOT_ATTEMPTED
        self.api.write_guard = self.stopped  # this writer's guard for this call's attempts (one Api, two writers)
        # A destructive write's retries ask the live pause too (unless the live re-check set its own retry guard).
        own_retry_guard = destructive and self.live_pause is not None and self.api.retry_guard is None
        if own_retry_guard:
            self.api.retry_guard = self.live_pause
        try:
            self.body = call()
        except WriteStopped as err:
            return self._stopped_mid_call(what, err, fields)
        except Unavailable as err:
            if err.answered:
                self.fail(f"{what} failed: {err}", err)
                return Result.FAILED
            self.outcome.unconfirmed.append(what)
            log.error("unconfirmed: the write was sent but no answer came; the next pass finds out",
                      extra=dict(fields, write=what, error=str(err)))
            return Result.UNCONFIRMED
        except ApiError as err:
            if err.status == 409 and conflict_ok:
                return Result.CONFLICT
            self.fail(f"{what} failed: {err}", err)
            return Result.FAILED
        finally:
            if own_retry_guard:
                self.api.retry_guard = None
        return Result.DONE if self.body is not None else Result.GONE


def _uid_of(obj: object) -> str:
    """The uid of an object read back; "" when it cannot be told (an undecodable answer proves nothing)."""
    try:
        return text_at(obj_at(obj, "metadata"), "uid") if isinstance(obj, dict) else ""
    except BadObject:
        return ""
