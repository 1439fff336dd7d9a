"""Recovery confirmation, the writing side: mark a claim when we free its pod; settle it when later passes
confirm (or give up on) its replacement. The judgment is planner/recovery.py.

The state lives in the cluster, on the claim (a CronJob pass remembers nothing): the label
`rwo-failover.io/recovery` lets a pass find pending claims with one label-selected list, and the annotation
of the same name holds the record as JSON. Both come off when the claim is settled.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Callable, Optional

from .events import EventRecorder
from .metrics import Metrics
from .model import RECOVERY_ANNOTATION, RECOVERY_LABEL, parse_time
from .planner.recovery import Record, Verdict
from .planner.types import PodAction
from .writer import Writer

log = logging.getLogger("rwo_failover")


class RecoveryTracker:
    def __init__(self, writer: Writer, events: EventRecorder, metrics: Optional[Metrics],
                 now: Callable[[], datetime]) -> None:
        self.writer, self.events, self.metrics, self.now = writer, events, metrics, now

    def mark(self, action: PodAction, not_ready_since: str) -> None:
        """We force-deleted this pod: record, on each claim it freed, what its replacement must look like."""
        record = Record(action.name, action.uid, action.node, action.controller, parse_time(not_ready_since),
                        self.now())
        for key in action.claims:
            namespace, _, name = key.partition("/")
            self.writer.patch_claim(namespace, name, {"metadata": {
                "labels": {RECOVERY_LABEL: "pending"}, "annotations": {RECOVERY_ANNOTATION: record.to_json()}}},
                "record the pod we freed, to confirm its recovery")

    def settle(self, verdict: Verdict) -> None:
        claim = verdict.claim
        if verdict.state == "waiting":
            log.info("recovery not confirmed yet", extra={"claim": claim.key, "missing": verdict.detail})
            return
        if verdict.state == "recovered":
            self.events.claim(claim.key, claim.uid, "RWOVolumeRecovered",
                              f"replacement {verdict.detail} Running and Ready with the volume attached "
                              f"{verdict.failover_seconds:.0f}s after its node went NotReady, of which "
                              f"{verdict.waited_on_us_seconds:.0f}s until rwo-failover freed the volume")
            if self.metrics:
                self.metrics.recovered(verdict.failover_seconds)
            log.info("recovery confirmed", extra={"claim": claim.key, "failover_seconds": verdict.failover_seconds,
                                                  "waited_on_us_seconds": verdict.waited_on_us_seconds})
        elif verdict.state == "not-recovered":
            self.events.claim(claim.key, claim.uid, "RWOVolumeNotRecovered",
                              f"no recovery confirmed within RECOVERY_TIMEOUT_SECONDS: {verdict.detail}",
                              event_type="Warning")
            if self.metrics:
                self.metrics.not_recovered_now()
            log.warning("recovery not confirmed in time", extra={"claim": claim.key, "missing": verdict.detail})
        self.writer.patch_claim(claim.namespace, claim.name, {"metadata": {
            "labels": {RECOVERY_LABEL: None}, "annotations": {RECOVERY_ANNOTATION: None}}}, "settle its recovery")
