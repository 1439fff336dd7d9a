"""Recovery confirmation: did the pod we force-deleted come back, and how long did the outage last?

For every claim whose pod we freed, later passes look for its replacement: for a StatefulSet, the same name
with a new UID; otherwise a pod of the same controller. It must be Running and Ready on another node, with
the claim's volume attached there. Then the failover time is known: from the node going NotReady to the
replacement Ready, of which "waiting on us" is the part up to our force-delete. Not confirmed within
RECOVERY_TIMEOUT_SECONDS, the record says what is missing.

The record is ours, kept where tenants cannot write (a ConfigMap in RECOVERY_NAMESPACE), and even so it is
believed only where the pass can check it itself: strict types, ranges and size; times in order and no later
than now; the claim it names still has the uid we wrote and is still bound to the volume we wrote; and no
live pod still has the UID of the pod it says we freed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..model import (
    CLOCK_TOLERANCE_SECONDS,
    BadObject,
    Claim,
    Pod,
    RecoveryEntry,
    Snapshot,
    int_at,
    is_name,
    parse_time,
    text_at,
)
from ..settings import Settings
from .liveness import age

MAX_RECORD_BYTES = 4096  # ours are ~400 bytes; anything bigger was not written by us
_LIMITS = {"pod": 253, "uid": 128, "node": 253, "controller": 320, "claim": 317, "claimUID": 128, "volume": 253}


_KIND_CHARS, _NAME_CHARS = 63, 253  # a Kind and an object name as Kubernetes makes them; the record allows 320


def _plain(text: str, limit: int) -> bool:
    return 0 < len(text) <= limit and text.isascii() and text.isprintable() and not {"/", "~"} & set(text)


def _bounded(text: str, limit: int) -> str:
    """`text` when it is plain ASCII of at most `limit` characters without a "/" or "~"; else a readable prefix,
    "~" and a hash of the whole, at most `limit` characters too: the same for the same text, never a plain one."""
    if _plain(text, limit):
        return text
    prefix = "".join(c for c in text[:min(64, limit - 41)] if c.isascii() and c.isprintable() and c not in "/~")
    return f"{prefix}~{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:40]}"


def controller_ref(kind: str | None, name: str) -> str:
    """How a record names a pod's controller: "Kind/name", "" for none. An ownerReference is its tenant's to
    write, and the API server checks only that its kind and name are not empty: a 404-character name once made
    a record our own parser rejected, never settled nor reported (issue 26). Bounded here on the way in, so every
    record parses; a replacement is matched by bounding its own controller the same way."""
    if not kind:
        return ""
    return f"{_bounded(kind, _KIND_CHARS)}/{_bounded(name, _NAME_CHARS)}"


@dataclass(frozen=True)
class Record:
    """What we wrote when we freed a claim's pod (a ConfigMap's data.record, as JSON)."""

    pod: str
    uid: str
    node: str
    controller: str  # "Kind/name"; "" for a pod without a controller
    not_ready_since: datetime | None
    deleted_at: datetime
    claim: str  # "namespace/name"
    claim_uid: str
    volume: str  # the PV the claim was bound to when we freed it

    @property
    def namespace(self) -> str:
        return self.claim.partition("/")[0]

    @property
    def statefulset(self) -> bool:
        return self.controller.partition("/")[0] == "StatefulSet"

    def to_json(self) -> str:
        def stamp(t: datetime | None) -> str:
            return t.strftime("%Y-%m-%dT%H:%M:%SZ") if t else ""

        return json.dumps({"version": 2, "pod": self.pod, "uid": self.uid, "node": self.node,
                           "controller": self.controller, "notReadySince": stamp(self.not_ready_since),
                           "deletedAt": stamp(self.deleted_at), "claim": self.claim, "claimUID": self.claim_uid,
                           "volume": self.volume}, sort_keys=True)

    @classmethod
    def parse(cls, text: Any) -> Record:
        """The record, or BadObject naming what is wrong with it."""
        if not isinstance(text, str) or len(text.encode()) > MAX_RECORD_BYTES:
            raise BadObject(f"not a string of at most {MAX_RECORD_BYTES} bytes")
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            raise BadObject("not JSON") from None
        if not isinstance(data, dict):
            raise BadObject("not a JSON object")
        int_at(data, "version", 2, low=2, high=2)
        found = {key: text_at(data, key) for key in _LIMITS}
        for key, limit in _LIMITS.items():
            if (not found[key] and key != "controller") or len(found[key]) > limit:
                raise BadObject(f"{key}: missing, or longer than {limit} characters")
        namespace, _, claim_name = found["claim"].partition("/")
        names = (found["pod"], found["node"], found["volume"], claim_name)
        if not is_name(namespace, namespace=True) or not all(is_name(name) for name in names):
            raise BadObject("pod, node, volume or claim: not an object name")
        deleted = parse_time(data.get("deletedAt"))
        if deleted is None:
            raise BadObject("deletedAt: missing")
        return cls(found["pod"], found["uid"], found["node"], found["controller"],
                   parse_time(data.get("notReadySince")), deleted, found["claim"], found["claimUID"], found["volume"])


@dataclass(frozen=True)
class Verdict:
    entry: RecoveryEntry  # the stored record
    # "recovered", "not-recovered", "waiting"; "obsolete" (its claim is gone or rebound, or the record does not
    # hold up: removed without a word to the claim); "unreadable" (not a record of ours: left alone, skipped)
    state: str
    detail: str = ""
    claim: Claim | None = None
    failover_seconds: float = 0.0  # NotReady -> replacement Ready
    waited_on_us_seconds: float = 0.0  # NotReady -> our force-delete
    times_out_at: datetime | None = None  # while waiting: when it becomes "not-recovered"


def _replacements(claim: Claim, record: Record, pods: tuple[Pod, ...]) -> list[Pod]:
    kind = record.controller.partition("/")[0]
    found = []
    for pod in pods:
        if pod.namespace != claim.namespace or claim.name not in pod.claims or pod.uid == record.uid:
            continue
        same = pod.name == record.pod if kind == "StatefulSet" else (
            controller_ref(pod.controller_kind, pod.controller_name) == record.controller if kind else True)
        if same and not pod.deleting:
            found.append(pod)
    return found


def _missing(claim: Claim, record: Record, replacement: Pod | None, *, snapshot: Snapshot) -> str | None:
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


def _doubt(record: Record, snapshot: Snapshot) -> str | None:
    """Why the pass cannot believe this record, from what it can check itself; None when it holds up."""
    # deletedAt is the writing pass's reading of the server clock; this pass may read another API server's, up to
    # CLOCK_TOLERANCE_SECONDS behind: a record read a second after it was written is not from the future.
    if record.deleted_at > snapshot.now + timedelta(seconds=CLOCK_TOLERANCE_SECONDS) or \
            (record.not_ready_since and record.not_ready_since > record.deleted_at):
        return "its times are later than now, or out of order"
    claim = snapshot.claims.get(record.claim)
    volume = snapshot.volumes.get(record.volume)
    if claim is None or claim.uid != record.claim_uid or volume is None or not volume.bound_to(claim):
        return f"claim {record.claim} is gone, or no longer the claim (uid and volume) it freed"
    if any(p.uid == record.uid for p in snapshot.recovery_pods):
        return f"pod {record.namespace}/{record.pod} with the UID it says was freed still exists"
    return None


def _ready_at(pod: Pod, record: Record, now: datetime) -> datetime:
    """The replacement's Ready time is the kubelet's clock: bounded by now (server clock), then by our delete, which
    a record up to CLOCK_TOLERANCE_SECONDS ahead of this pass's now puts later: never Ready before we freed it."""
    ready = pod.ready_since or now
    return max(min(ready, now), record.deleted_at)


def judge(entry: RecoveryEntry, snapshot: Snapshot, settings: Settings) -> Verdict:
    try:
        record = Record.parse(entry.record)
    except BadObject as err:
        return Verdict(entry, "unreadable", f"recovery record {entry.name} cannot be read: {err}")
    doubt = _doubt(record, snapshot)
    if doubt:
        return Verdict(entry, "obsolete", doubt)
    claim = snapshot.claims[record.claim]
    candidates = _replacements(claim, record, snapshot.recovery_pods)
    missing: list[tuple[str | None, Pod | None]] = [
        (_missing(claim, record, pod, snapshot=snapshot), pod) for pod in candidates] or [(
            _missing(claim, record, None, snapshot=snapshot), None)]
    done = next((pod for why, pod in missing if why is None), None)
    deadline = record.deleted_at + timedelta(seconds=settings.recovery_timeout_seconds)
    if done is not None and record.not_ready_since:
        ready = _ready_at(done, record, snapshot.now)
        return Verdict(entry, "recovered", f"{done.namespace}/{done.name} on {done.node}", claim,
                       age(ready, record.not_ready_since), age(record.deleted_at, record.not_ready_since))
    if snapshot.now >= deadline:
        return Verdict(entry, "not-recovered", missing[0][0] or "not confirmed", claim)
    return Verdict(entry, "waiting", missing[0][0] or "", claim, times_out_at=deadline)


def judge_all(snapshot: Snapshot, settings: Settings) -> tuple[Verdict, ...]:
    return tuple(judge(e, snapshot, settings) for e in sorted(snapshot.recovery_records, key=lambda e: e.name))


def readable(entries: tuple[RecoveryEntry, ...]) -> list[Record]:
    """The records that parse: what observe must read to judge them."""
    found = []
    for entry in entries:
        try:
            found.append(Record.parse(entry.record))
        except BadObject:
            continue
    return found
