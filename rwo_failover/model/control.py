"""The control ConfigMap (names.CONTROL_NAME): the pause switch an operator sets, and the storm cool-down's state."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .fields import Json, items_at, obj_at, parse_time, strings_at, text_at, time_at

PAUSED, PAUSED_BY, REASON = "paused", "pausedBy", "reason"
REQUEST_PREFIX = "pause."  # data.pause.<requester>: that requester's pause, its value the reason (NHC's pauseRequests)
SHOWN_REQUESTS = 10  # how many requests a log line names; the rest are counted
TRIPPED_AT, CALM_SINCE = "stormTrippedAt", "stormCalmSince"
MAX_TEXT = 200  # what an operator's note may add to a log line


@dataclass(frozen=True)
class Pause:
    """Why a pass writes nothing: an operator's pause (data.paused=true), or, `fail_safe`, a switch that cannot be
    read. What it is decides the exit code; `reason` only says it, in an operator's words as much as ours."""

    reason: str = ""
    fail_safe: bool = False

    def __bool__(self) -> bool:
        return bool(self.reason)

    def __str__(self) -> str:
        return self.reason

    @property
    def chosen(self) -> bool:
        """An operator's pause: no failure (exit 0)."""
        return bool(self.reason) and not self.fail_safe


NOT_PAUSED = Pause()
FAILING_SAFE = "failing safe: nothing is written until it can be read"


def unreadable_switch(error: str) -> Pause:
    """The pause of a control object that cannot be read: nothing is written until it can be."""
    return Pause(f"{error}; {FAILING_SAFE}", fail_safe=True)


@dataclass(frozen=True)
class PauseRequest:
    """One requester's pause: data.pause.<requester>, whose value is the reason; lifted by removing the key."""

    requester: str
    reason: str = ""
    at: datetime | None = None  # when the key was last written: the API server's stamp

    def describe(self) -> str:
        return " ".join(p for p in (self.requester, f"at {self.at.isoformat()}" if self.at else "",
                                    f"({self.reason})" if self.reason else "") if p)


@dataclass(frozen=True)
class Control:
    paused: bool = False  # data.paused=true, or any pause request: nothing is written while either stands
    paused_by: str = ""  # data.pausedBy, else the field manager that last wrote data.paused (kubectl-patch, ...)
    paused_at: datetime | None = None  # when data.paused was last written: the API server's stamp
    reason: str = ""
    tripped_at: datetime | None = None  # a brake last tripped (a pass wrote it, server time)
    calm_since: datetime | None = None  # the first pass after it that no brake refused
    resource_version: str = ""
    # data.paused neither true nor false: the switch cannot be read, and a pass fails safe (writes nothing), while
    # the storm's memory and the version on it still are, so a storm meanwhile is written down all the same
    switch_error: str = ""
    requests: tuple[PauseRequest, ...] = ()  # by requester, sorted
    switch_on: bool = False  # data.paused=true itself (the single switch, beside the requests)

    @classmethod
    def from_json(cls, obj: Json) -> Control:
        """BadObject when a time is not one (the caller fails safe); a switch neither true nor false is
        `switch_error`."""
        meta, data = obj_at(obj, "metadata"), strings_at(obj, "data")
        flag = data.get(PAUSED, "false").strip().lower()
        unreadable = "" if flag in ("true", "false") else f"data.{PAUSED} is {flag[:40]!r}, neither true nor false"
        requests = tuple(sorted((PauseRequest(key[len(REQUEST_PREFIX):][:MAX_TEXT], value[:MAX_TEXT],
                                              _writer_of(meta, key)[1])
                                 for key, value in data.items() if key.startswith(REQUEST_PREFIX)),
                                key=lambda r: r.requester))
        if not unreadable and any(not r.requester for r in requests):
            unreadable = f"data.{REQUEST_PREFIX} names no requester: say whose pause it is (data.pause.<name>)"
        by, at = _writer_of(meta, PAUSED)
        on = flag == "true"
        return cls(on or bool(requests), data.get(PAUSED_BY, "")[:MAX_TEXT] or by if on else "", at if on else None,
                   data.get(REASON, "")[:MAX_TEXT] if on else "", time_at(data, TRIPPED_AT),
                   time_at(data, CALM_SINCE), text_at(meta, "resourceVersion"), unreadable, requests, on)

    def describe(self) -> str:
        """Who paused, when and why, as far as the object says: the switch, then each request."""
        parts = [f"by {self.paused_by}" if self.paused_by else "",
                 f"at {self.paused_at.isoformat()}" if self.paused_at else "",
                 f"({self.reason})" if self.reason else ""]
        if self.requests:
            named = "; ".join(r.describe() for r in self.requests[:SHOWN_REQUESTS])
            more = len(self.requests) - SHOWN_REQUESTS
            parts.append(f"requested by {named}{f'; and {more} more' if more > 0 else ''}")
        return " ".join(p for p in parts if p)


def _writer_of(meta: Json, key: str) -> tuple[str, datetime | None]:
    """The managedFields entry that owns data.<key>: its manager, and the server's time of that write."""
    for entry in items_at(meta, "managedFields"):
        fields = entry.get("fieldsV1")
        owned = fields.get("f:data") if isinstance(fields, dict) else None
        if isinstance(owned, dict) and f"f:{key}" in owned:
            return text_at(entry, "manager")[:MAX_TEXT], parse_time(entry.get("time"))
    return "", None
