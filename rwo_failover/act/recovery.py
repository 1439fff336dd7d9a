"""Recovery confirmation, the writing side: record each claim whose pod we free; settle the record when later
passes confirm (or give up on) its replacement. The judgment is planner/recovery.py.

The state lives in the cluster (a CronJob pass remembers nothing), and where no tenant can write it: one
ConfigMap per claim in RECOVERY_NAMESPACE, named after the claim's uid, labelled `rwo-failover.io/recovery`
so a pass finds them all with one label-selected list. A settled record is deleted.

A record is written *before* its pod's delete (write-ahead): whatever then happens to the delete (its answer
lost, a 409 from a replacement, PodGC first, a stop signal refusing every later write), the claim's
failover is watched. A record whose pod was never deleted after all (the delete refused) names a UID that
still exists, and the next pass drops it; never one this pass has just written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from ..model import RECOVERY_LABEL, parse_time
from ..model.event_reasons import Reason
from ..planner.recovery import Record, Verdict
from ..planner.types import PodAction
from .events import EventRecorder
from .writer import Result, Writer

log = logging.getLogger(__name__)


class RecoveryMetrics(Protocol):
    """What recovery confirmation reports (run.metrics.Metrics is one): act never imports the run layer."""

    def recovered(self, seconds: float) -> None: ...

    def not_recovered_now(self) -> None: ...


def records_for(action: PodAction, not_ready_since: str, now: datetime) -> list[tuple[str, Record]]:
    """The record of each claim the pod's delete frees, with its ConfigMap's name (after the claim's uid, which
    the API server assigns). Everything in it a tenant wrote is bounded on the way in (the pod's controller:
    planner.recovery.controller_ref), so Record.parse reads back whatever this writes."""
    return [(f"rwo-recovery-{claim_uid}", Record(action.name, action.uid, action.node, action.controller,
                                                 parse_time(not_ready_since), now, key, claim_uid, volume))
            # strict=False: an action without `bound` (its default, ()) proves no claim's uid, so writes no record
            for key, (claim_uid, volume) in zip(action.claims, action.bound, strict=False)]


class RecoveryTracker:
    def __init__(self, writer: Writer, events: EventRecorder, metrics: RecoveryMetrics | None, *,
                 now: Callable[[], datetime], namespace: str) -> None:
        self.writer, self.events, self.metrics, self.now = writer, events, metrics, now
        self.namespace = namespace
        self.marked: set[str] = set()  # the records this pass wrote: settle never drops them as obsolete

    def mark(self, action: PodAction, not_ready_since: str) -> None:
        """We are about to force-delete this pod: record, for each claim it frees, what its replacement must look
        like, with the claim's uid and volume, so a later pass can tell the record still speaks of that claim."""
        for name, record in records_for(action, not_ready_since, self.now()):
            self.marked.add(name)
            body = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": self.namespace, "labels": {RECOVERY_LABEL: "pending"}},
                    "data": {"record": record.to_json()}}
            if self.writer.create_recovery_record(self.namespace, body) is Result.CONFLICT:
                # An earlier freeing of the same claim, not settled yet: this one supersedes it.
                self.writer.patch_recovery_record(self.namespace, name, {"data": body["data"]})

    def settle(self, verdict: Verdict) -> None:
        name, claim = verdict.entry.name, verdict.claim
        if verdict.state == "obsolete" and name in self.marked:
            return  # judged before this pass freed the pod again: the record it just wrote stands
        if verdict.state == "waiting":
            log.info("recovery not confirmed yet", extra={"record": name, "missing": verdict.detail})
            return
        if verdict.state == "unreadable":
            return  # not a record of ours: skipped with its reason (planner), and left alone
        if verdict.state == "obsolete":
            log.warning("recovery record does not hold up; removing it without a word to the claim",
                        extra={"record": name, "reason": verdict.detail})
        elif verdict.state == "recovered" and claim is not None:
            self.events.claim(claim.key, claim.uid, Reason.RWOVolumeRecovered,
                              message=f"replacement {verdict.detail} Running and Ready with the volume attached "
                              f"{verdict.failover_seconds:.0f}s after its node went NotReady, of which "
                              f"{verdict.waited_on_us_seconds:.0f}s until rwo-failover freed the volume")
            if self.metrics:
                self.metrics.recovered(verdict.failover_seconds)
            log.info("recovery confirmed", extra={"claim": claim.key, "failover_seconds": verdict.failover_seconds,
                                                  "waited_on_us_seconds": verdict.waited_on_us_seconds})
        elif verdict.state == "not-recovered" and claim is not None:
            self.events.claim(claim.key, claim.uid, Reason.RWOVolumeNotRecovered,
                              message=f"no recovery confirmed within RECOVERY_TIMEOUT_SECONDS: {verdict.detail}",
                              event_type="Warning")
            if self.metrics:
                self.metrics.not_recovered_now()
            log.warning("recovery not confirmed in time", extra={"claim": claim.key, "missing": verdict.detail})
        self.writer.delete_recovery_record(self.namespace, name)
