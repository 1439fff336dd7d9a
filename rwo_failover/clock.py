"""The API server's clock, as this pass sees it.

Every age the pass judges (NotReady for how long, Lease renewed when) compares a server
timestamp with "now". Taking "now" from this process would make a Job whose clock runs
90 s fast see a heartbeating node as dead. So "now" is the `Date` header of the latest API
response, plus the monotonic time elapsed since it arrived. `Date` has one-second
resolution and is truncated, so this clock runs up to a second *behind* the server's: ages
come out up to a second short, which only ever delays a verdict of "down".
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import Callable, Optional


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class ServerClock:
    def __init__(self, wall: Callable[[], datetime] = utcnow,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.wall, self.monotonic = wall, monotonic
        self._seen: Optional[tuple[datetime, float]] = None

    def observe(self, date_header: Optional[str]) -> None:
        """Record a response's Date header; one that cannot be parsed is ignored."""
        if not date_header:
            return
        try:
            server = parsedate_to_datetime(date_header).astimezone(timezone.utc)
        except (TypeError, ValueError, IndexError):
            return
        self._seen = (server, self.monotonic())

    @property
    def synced(self) -> bool:
        return self._seen is not None

    def now(self) -> datetime:
        """The server's time now; this process's wall clock only until the server has answered once."""
        if self._seen is None:
            return self.wall()
        server, at = self._seen
        return server + timedelta(seconds=self.monotonic() - at)


class SharedServerClock(ServerClock):
    """Continuous mode's one view of the server's clock, fed by every response of every pass and watch.

    A Date header says the server's time was at least that (truncated to the second) when the response
    arrived, so each one is a lower bound, lagging the server by up to a second. Many responses, arriving at
    different fractions of a second, give a tighter one: the largest lower bound seen in the last
    WINDOW_SECONDS, carried forward on the monotonic clock. It is still never ahead of the server (beyond
    this machine's monotonic drift over that window), so ages are never overestimated; it only lets a
    decision that waits for a moment (Plan.wake_at) come up to a second sooner.
    """

    WINDOW_SECONDS = 300.0

    def __init__(self, wall: Callable[[], datetime] = utcnow, monotonic: Callable[[], float] = time.monotonic) -> None:
        super().__init__(wall, monotonic)
        self._bounds: list[tuple[float, float]] = []  # (server seconds minus monotonic seconds, monotonic)

    def observe(self, date_header: Optional[str]) -> None:
        seen = self._seen
        super().observe(date_header)
        if self._seen is seen or self._seen is None:
            return
        server, at = self._seen
        self._bounds = [b for b in self._bounds if at - b[1] <= self.WINDOW_SECONDS] + \
            [(server.timestamp() - at, at)]

    def now(self) -> datetime:
        bounds = self._bounds
        if not bounds:
            return super().now()
        offset = max(b[0] for b in bounds)
        return datetime.fromtimestamp(self.monotonic() + offset, timezone.utc)
