"""Watch for the fixture API server, served as kube-apiserver's watch cache serves it.

`GET <list path>?watch=1` answers 200 with a chunked stream of JSON watch events, one a line:
`{"type": "ADDED"|"MODIFIED"|"DELETED"|"BOOKMARK"|"ERROR", "object": {...}}`.

- `resourceVersion` unset or "0": a synthetic ADDED for every current object, then the changes after it.
  Any other value: only the changes after that version. One older than the retained history (`limit`
  changes per resource) answers 200 and one ERROR event, code 410, reason Expired, "too old resource
  version: X (Y)", then ends, as the watch cache does (cacher.go returns an error watcher).
- `allowWatchBookmarks=true`: a BOOKMARK (only `metadata.resourceVersion`) about every `bookmark_seconds`
  (kube-apiserver: roughly every minute) and 2 s before the timeout, carrying the version the watcher has
  reached, so a quiet watch still learns how far it is.
- `timeoutSeconds`: the stream ends cleanly then (kube-apiserver defaults to 30-60 min).
- A namespaced path (`/api/v1/namespaces/NS/configmaps`) watches that namespace only.
- Label and field selectors filter events as the real server does: an object that starts matching arrives
  as ADDED, one that stops matching as DELETED.

Faults (`Fault` kinds in fake_apiserver): "watch-drop" cuts the stream without its final chunk after
`delay` seconds; "watch-lag" sends nothing at all (no event, no bookmark) for `delay` seconds, then catches
up; "watch-gone" answers the ERROR 410 event whatever the version asked for (unlimited: a 410 storm);
"watch-empty" answers 200 and ends at once with no event (a server shutting down behind a load balancer, a
proxy that does not stream); "watch-behind" delivers each change only `delay` seconds after it happened and
bookmarks only the version delivered so far: a lagging stream that still looks alive, and with a long `delay`
bookmarks without progress (a server-side watch cache that stopped advancing).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .managed_fields import expand

WATCH_TIMEOUT_SECONDS = 1800.0
BOOKMARK_SECONDS = 60.0
BOOKMARK_BEFORE_TIMEOUT_SECONDS = 2.0


class Cut(Exception):
    """The stream must end without its terminating chunk: a dropped connection, or the server stopping."""


@dataclass(frozen=True)
class Change:
    version: int
    type: str  # ADDED, MODIFIED or DELETED
    key: str
    raw: bytes  # the object as of this change; for DELETED its last state, with the deletion's version
    old: bytes | None  # the object before it, to tell selector transitions apart
    at: float = field(default_factory=time.monotonic)  # when it happened ("watch-behind" delivers it later)


class History:
    """The changes each resource keeps for watches, bounded as a watch cache is."""

    def __init__(self, lock: threading.RLock, limit: int = 1000) -> None:
        self.changed = threading.Condition(lock)
        self.limit = limit
        self.changes: dict[str, deque[Change]] = {}
        self.evicted: dict[str, int] = {}  # the newest version no longer retained, per resource
        self.closing = False
        self.cut_generation = 0  # bumped by cut_all(): every open stream ends as if dropped

    def record(self, plural: str, change: Change) -> None:
        """Called with the store's lock held."""
        kept = self.changes.setdefault(plural, deque())
        kept.append(change)
        while len(kept) > self.limit:
            self.evicted[plural] = kept.popleft().version
        self.changed.notify_all()

    def forget(self, plural: str, current: int) -> None:
        """Drop every retained change (as etcd compaction does): a watch from an older version gets 410."""
        with self.changed:
            self.changes.pop(plural, None)
            self.evicted[plural] = current

    def clear(self) -> None:
        with self.changed:
            self.changes.clear()
            self.evicted.clear()

    def cut_all(self) -> None:
        with self.changed:
            self.cut_generation += 1
            self.changed.notify_all()

    def close(self) -> None:
        with self.changed:
            self.closing = True
            self.changed.notify_all()

    def too_old(self, plural: str, version: int) -> bool:
        return version < self.evicted.get(plural, 0)

    def after(self, plural: str, version: int, before: float = float("inf")) -> list[Change]:
        """The changes after `version`, only those that happened before `before` (a lagging stream's view)."""
        return [c for c in self.changes.get(plural, ()) if c.version > version and c.at <= before]


def event(kind: str, obj: bytes) -> bytes:
    return b'{"type":"' + kind.encode() + b'","object":' + expand(obj) + b"}\n"


def expired(version: int, oldest: int) -> bytes:
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": f"too old resource version: {version} ({oldest})", "reason": "Expired", "code": 410}
    return event("ERROR", json.dumps(status, separators=(",", ":")).encode())


def bookmark(kind: str, api_version: str, version: int) -> bytes:
    obj = {"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": str(version)}}
    return event("BOOKMARK", json.dumps(obj, separators=(",", ":")).encode())


@dataclass
class WatchRequest:
    plural: str
    kind: str
    api_version: str
    start: int
    initial: list[bytes]  # synthetic ADDED events (resourceVersion unset or "0")
    timeout: float
    bookmarks: bool
    bookmark_seconds: float
    matches: Callable[[bytes], bool] | None  # None: no selector
    fault: str = ""
    fault_delay: float = 0.0
    namespace: str = ""  # a namespaced path's: only its objects' changes (a namespace never changes)


@dataclass(kw_only=True)
class _Cursor:
    """Where one open watch stands: the version it has reached, and the moments that end its waits."""
    opened: float
    deadline: float
    generation: int  # History.cut_generation when it opened
    behind: float  # "watch-behind": how long each change is held back (0: not at all)
    position: int
    next_bookmark: float


def stream(history: History, current: Callable[[], int], w: WatchRequest) -> Iterator[bytes]:
    """The events of one watch, until its timeout; raises Cut to end it without the final chunk."""
    opened = time.monotonic()
    deadline = opened + w.timeout
    generation = history.cut_generation
    if w.fault == "watch-gone" or history.too_old(w.plural, w.start):
        yield expired(w.start, history.evicted.get(w.plural, w.start) + 1)
        return
    if w.fault == "watch-empty":
        return
    behind = w.fault_delay if w.fault == "watch-behind" else 0.0
    for raw in w.initial:
        yield event("ADDED", raw)
    cursor = _Cursor(opened=opened, deadline=deadline, generation=generation, behind=behind, position=w.start,
                     next_bookmark=_next_bookmark(opened, deadline, w.bookmark_seconds))
    if w.fault == "watch-lag":
        _hold(history, generation, opened + w.fault_delay)
    while True:
        changes, late, due = _next_batch(history, w, cursor, current=current)
        if late:
            yield expired(cursor.position, history.evicted[w.plural] + 1)
            return
        yield from _events(changes, w, cursor)
        if due and not changes:
            cursor.next_bookmark = _next_bookmark(time.monotonic(), deadline, w.bookmark_seconds)
            yield bookmark(w.kind, w.api_version, cursor.position)
        if time.monotonic() >= deadline:
            return


def _next_batch(history: History, w: WatchRequest, cursor: _Cursor, *,
                current: Callable[[], int]) -> tuple[list[Change], bool, bool]:
    """What the watch sends next, once there is anything: (changes, late, due). `late`: it fell out of the
    retained window while it waited. `due`: a bookmark is; on a quiet watch (no change at all since its position)
    the position first moves up to the current version, since every change up to now was seen (none matched)."""
    with history.changed:
        changes, late, due = _await_news(history, w, cursor)
        if not late and not changes and due and not history.after(w.plural, cursor.position):
            cursor.position = max(cursor.position, current())
    return changes, late, due


def _await_news(history: History, w: WatchRequest, cursor: _Cursor) -> tuple[list[Change], bool, bool]:
    """With the store's lock held: wait until there are changes to send, a bookmark is due, the timeout has come
    or the watch fell out of the retained window; (changes, late, due) as _next_batch."""
    while True:
        _check_cut(history, w, cursor)
        if history.too_old(w.plural, cursor.position):  # fell out of the window while it waited
            return [], True, False
        now = time.monotonic()
        changes = history.after(w.plural, cursor.position, now - cursor.behind)
        due = w.bookmarks and now >= cursor.next_bookmark
        if changes or due or now >= cursor.deadline:
            return changes, False, due
        history.changed.wait(max(0.01, _wake_at(history, w, cursor) - now))


def _check_cut(history: History, w: WatchRequest, cursor: _Cursor) -> None:
    """Raise Cut when the stream must end without its final chunk: the server closing, cut_all(), "watch-drop"."""
    if history.closing or history.cut_generation != cursor.generation:
        raise Cut()
    if w.fault == "watch-drop" and time.monotonic() >= cursor.opened + w.fault_delay:
        raise Cut()


def _wake_at(history: History, w: WatchRequest, cursor: _Cursor) -> float:
    """When a waiting watch must look again even if no change notifies it: its timeout, its next bookmark, a
    held-back change becoming due ("watch-behind"), its drop ("watch-drop")."""
    wake = min(cursor.deadline, cursor.next_bookmark if w.bookmarks else cursor.deadline)
    if cursor.behind:  # a held-back change becomes due by time, not by a notify
        wake = min(wake, _next_due(history.after(w.plural, cursor.position), cursor.behind))
    if w.fault == "watch-drop":
        wake = min(wake, cursor.opened + w.fault_delay)
    return wake


def _events(changes: list[Change], w: WatchRequest, cursor: _Cursor) -> Iterator[bytes]:
    """The events `changes` make for this watch (its namespace, its selectors); its position moves past each."""
    for change in changes:
        cursor.position = change.version
        if w.namespace and not change.key.startswith(w.namespace + "/"):
            continue
        kind = _event_type(change, w.matches)
        if kind:
            yield event(kind, change.raw)


def _next_bookmark(now: float, deadline: float, every: float) -> float:
    """As the watch cache's nextBookmarkTime: in `every` seconds, or 2 s before the timeout if sooner; never
    when that moment has passed already (inf)."""
    moment = min(now + every, deadline - BOOKMARK_BEFORE_TIMEOUT_SECONDS)
    return moment if moment > now else float("inf")


def _next_due(pending: list[Change], behind: float) -> float:
    return min((c.at + behind for c in pending), default=float("inf"))


def _hold(history: History, generation: int, until: float) -> None:
    """A lagging stream: nothing goes out until `until`, though changes pile up."""
    with history.changed:
        while (left := until - time.monotonic()) > 0:
            if history.closing or history.cut_generation != generation:
                raise Cut()
            history.changed.wait(min(left, 0.5))


def _event_type(change: Change, matches: Callable[[bytes], bool] | None) -> str | None:
    if matches is None:
        return change.type
    now = matches(change.raw)
    before = change.old is not None and matches(change.old)
    if change.type == "DELETED":
        return "DELETED" if before or now else None
    if now and before:
        return "MODIFIED"
    if now:
        return "ADDED"
    return "DELETED" if before else None
