"""Recovery confirmation: did the pod we force-deleted come back, and how long did the outage last?

For every claim whose pod we freed, later passes look for its replacement: for a StatefulSet, the same name
with a new UID; otherwise a pod of the same controller. It must be Running and Ready on another node, with
the claim's volume attached there. Then the failover time is known: from the node going NotReady to the
replacement Ready, of which "waiting on us" is the part up to our force-delete. Not confirmed within
RECOVERY_TIMEOUT_SECONDS, the record says what is missing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Optional

from ..config import Settings
from ..model import Claim, Pod, Snapshot, parse_time
from .liveness import age


@dataclass(frozen=True)
class Record:
    """What we wrote on the claim when we freed its pod (the RECOVERY_ANNOTATION, as JSON)."""

    pod: str
    uid: str
    node: str
    controller: str  # "Kind/name"
    not_ready_since: Optional[datetime]
    deleted_at: Optional[datetime]

    def to_json(self) -> str:
        stamp = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ") if t else ""  # noqa: E731 - a local shorthand
        return json.dumps({"pod": self.pod, "uid": self.uid, "node": self.node, "controller": self.controller,
                           "notReadySince": stamp(self.not_ready_since), "deletedAt": stamp(self.deleted_at)},
                          sort_keys=True)

    @classmethod
    def parse(cls, text: str) -> Optional["Record"]:
        try:
            data = json.loads(text)
            return cls(data["pod"], data["uid"], data["node"], data.get("controller", ""),
                       parse_time(data.get("notReadySince")), parse_time(data.get("deletedAt")))
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    state: str  # "recovered", "not-recovered", "waiting", or "unreadable"
    detail: str = ""
    failover_seconds: float = 0.0  # NotReady -> replacement Ready
    waited_on_us_seconds: float = 0.0  # NotReady -> our force-delete
    times_out_at: Optional[datetime] = None  # while waiting: when it becomes "not-recovered"


def _replacements(claim: Claim, record: Record, pods: tuple[Pod, ...]) -> list[Pod]:
    kind, _, name = record.controller.partition("/")
    found = []
    for pod in pods:
        if pod.namespace != claim.namespace or claim.name not in pod.claims or pod.uid == record.uid:
            continue
        same = pod.name == record.pod if kind == "StatefulSet" else (
            (pod.controller_kind, pod.controller_name) == (kind, name) if kind else True)
        if same and not pod.deleting:
            found.append(pod)
    return found


def _missing(claim: Claim, record: Record, replacement: Optional[Pod], snapshot: Snapshot) -> Optional[str]:
    """What still keeps the replacement from being confirmed; None when nothing does."""
    if replacement is None or not replacement.node:
        return "not scheduled: no replacement pod has a node"
    if replacement.node == record.node:
        return f"the replacement is on the dead node {record.node} again"
    elsewhere = [a for a in snapshot.attachments if a.volume == claim.volume and a.node != replacement.node]
    here = [a for a in snapshot.attachments if a.volume == claim.volume and a.node == replacement.node]
    if elsewhere and not here:
        return f"Multi-Attach: the volume is still attached to node {elsewhere[0].node}"
    if not any(a.attached for a in here):
        return f"the volume's attachment to node {replacement.node} is not attached"
    if replacement.ready != "True" or replacement.phase != "Running":
        return f"pod {replacement.name} is not Running and Ready on {replacement.node}"
    return None


def judge(claim: Claim, snapshot: Snapshot, settings: Settings) -> Verdict:
    record = Record.parse(claim.recovery)
    if record is None:
        return Verdict(claim, "unreadable", "the recovery record on the claim cannot be read")
    candidates = _replacements(claim, record, snapshot.namespace_pods)
    missing = [(_missing(claim, record, pod, snapshot), pod) for pod in candidates] or [(
        _missing(claim, record, None, snapshot), None)]
    done = next((pod for why, pod in missing if why is None), None)
    if done is not None and done.ready_since and record.not_ready_since:
        deleted = record.deleted_at or done.ready_since
        return Verdict(claim, "recovered", f"{done.namespace}/{done.name} on {done.node}",
                       age(done.ready_since, record.not_ready_since), age(deleted, record.not_ready_since))
    if record.deleted_at and age(snapshot.now, record.deleted_at) >= settings.recovery_timeout_seconds:
        return Verdict(claim, "not-recovered", missing[0][0] or "not confirmed")
    deadline = record.deleted_at + timedelta(seconds=settings.recovery_timeout_seconds) if record.deleted_at else None
    return Verdict(claim, "waiting", missing[0][0] or "", times_out_at=deadline)


def judge_all(snapshot: Snapshot, settings: Settings) -> tuple[Verdict, ...]:
    return tuple(judge(c, snapshot, settings) for c in sorted(snapshot.recovering_claims, key=lambda c: c.key))
