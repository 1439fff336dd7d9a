"""Is a watch cache keeping up with the API server? Judged by progress, not by traffic.

A watch that keeps sending bookmarks at the resourceVersion it started from (what a server-side watch cache
that stopped advancing looks like) is "heard from" all the time, yet its cache never moves: a node that died
went unseen for 40 s of passes while /readyz said 200. So now and then the cache (kube/cache.py) reads the
server's current resourceVersion cheaply and consistently (a list of one node, its metadata only) and the node
reflector must reach that version within the grace period (WATCH_STALE_SECONDS: the API server bookmarks the
version it has reached about once a minute, so a healthy watch reaches it well within that). A cache that
has not is behind: it is listed afresh, /readyz fails, and the metric counts it.

resourceVersions are opaque by the API conventions; kube-apiserver's are etcd revisions, integers that only
grow. Versions that are not integers are never compared (never judged behind by progress: silence still is).
Two ways the check could go blind are judged too: no probe answered (nor a list made) for 2 x the grace, as when
list calls are refused under the overload that stalls a watch cache (progress unknown is no progress); and a
server version below the one the cache had before the probe was sent (an etcd restored from a snapshot without
--bump-revision: a watch resumed from the cache's version waits for a revision the server has yet to reach,
while bookmarking the old one). Either way the cache is behind until a list replaces it.
"""

from __future__ import annotations

import threading
from collections import deque

MAX_PENDING = 64


def _number(version: str) -> int | None:
    try:
        return int(version)
    except (TypeError, ValueError):
        return None


class Progress:
    """The server versions seen by probes that a cache has yet to reach, oldest first."""

    def __init__(self, grace_seconds: float) -> None:
        self.grace = grace_seconds
        self._pending: deque[tuple[int, float]] = deque()  # (server version, when it was read), rising
        self._lock = threading.Lock()
        self._checked_at: float | None = None  # the last answered probe or list: progress known then
        self._backwards = ""  # why the server's versions went backwards, until a list replaces the cache

    def probed(self, server_version: str, at: float, cache_before: str = "") -> None:
        """The server's version read at `at` (monotonic); the cache must reach it within the grace period.
        `cache_before` is the cache's version before the probe was sent: the server's cannot be below it."""
        found, before = _number(server_version), _number(cache_before)
        with self._lock:
            if server_version:
                self._checked_at = at
            if found is not None and before is not None and found < before:
                self._backwards = (f"the server's resourceVersion {found} is below the cache's {before}: versions "
                                   "went backwards (etcd restored?)")
            if found is not None and (not self._pending or found > self._pending[-1][0]) \
                    and len(self._pending) < MAX_PENDING:  # the oldest are the ones judged
                self._pending.append((found, at))

    def behind(self, cache_version: str, now: float) -> str | None:
        """Why the cache is behind (a version it has not reached for longer than the grace), or None."""
        cache = _number(cache_version)
        with self._lock:
            if self._backwards:
                return self._backwards
            if self._checked_at is not None and now - self._checked_at > 2 * self.grace:
                return f"the server's resourceVersion could not be read for {now - self._checked_at:.0f}s"
            if cache is None:
                return None
            while self._pending and self._pending[0][0] <= cache:
                self._pending.popleft()
            if not self._pending or now - self._pending[0][1] <= self.grace:
                return None
            server, at = self._pending[0]
        return (f"resourceVersion {cache_version} has not reached the server's {server}, read {now - at:.0f}s "
                "ago: the watch is not making progress")

    def listed(self, started: float) -> None:
        """A list begun at `started` replaced the cache: it supersedes every probe read before it began (also
        those above its version, after versions went backwards), and knows the server's version."""
        with self._lock:
            while self._pending and self._pending[0][1] <= started:
                self._pending.popleft()
            self._backwards, self._checked_at = "", max(started, self._checked_at or started)

    def clear(self) -> None:
        with self._lock:
            self._pending.clear()
            self._backwards, self._checked_at = "", None


def at_or_past(have: str, wanted: str) -> bool:
    """Whether a cache at version `have` holds the server's state at `wanted`: etcd revisions, integers that only
    grow; any other version is never at or past anything."""
    return have.isdigit() and wanted.isdigit() and int(have) >= int(wanted)
