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
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Optional

MAX_PENDING = 64


def _number(version: str) -> Optional[int]:
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

    def probed(self, server_version: str, at: float) -> None:
        """The server's version read at `at` (monotonic); the cache must reach it within the grace period."""
        found = _number(server_version)
        with self._lock:
            if found is not None and (not self._pending or found > self._pending[-1][0]) \
                    and len(self._pending) < MAX_PENDING:  # the oldest are the ones judged
                self._pending.append((found, at))

    def behind(self, cache_version: str, now: float) -> Optional[str]:
        """Why the cache is behind (a version it has not reached for longer than the grace), or None."""
        cache = _number(cache_version)
        with self._lock:
            if cache is None:
                return None
            while self._pending and self._pending[0][0] <= cache:
                self._pending.popleft()
            if not self._pending or now - self._pending[0][1] <= self.grace:
                return None
            server, at = self._pending[0]
        return (f"resourceVersion {cache_version} has not reached the server's {server}, read {now - at:.0f}s "
                "ago: the watch is not making progress")

    def clear(self) -> None:
        with self._lock:
            self._pending.clear()
