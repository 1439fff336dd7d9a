"""The API server's clock, as this pass sees it.

Every age the pass judges compares a server timestamp (a managedFields time) with "now". Taking "now" from
this process would make a Job whose clock runs 90 s fast see a heartbeating node as dead. So "now" is the
`Date` header of the latest API response, plus the monotonic time elapsed since it arrived. `Date` has
one-second resolution and is truncated, so this clock runs up to a second *behind* the server's: ages come
out up to a second short, which only ever delays a verdict of "down". Until a response has carried a Date
header there is no "now" at all: `now()` raises, and nothing is judged.

A Date header is the API server's clock only when nothing between here and the server rewrites it: nginx,
for one, sends its own by default. So each pass first has the API server stamp something with its own clock
(a server-side dry-run create: stored nowhere) and checks the Date header of that same answer against the
stamp (`check`): the two must agree within CLOCK_TOLERANCE_SECONDS, or nothing is judged. From then on
"now" never runs more than that tolerance past the checked answer (plus the monotonic time since), so a
later answer by another route, with a Date ahead of the server's, cannot age anything early.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

from ..model import CLOCK_TOLERANCE_SECONDS


class ServerClockUnknown(Exception):
    """No API response has carried a Date header that parses (a proxy may strip it)."""


class ServerClock:
    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.monotonic = monotonic
        self._seen: tuple[datetime, float] | None = None
        self.last_date: datetime | None = None  # the Date header of the latest answer that carried one
        # The answer whose Date was checked against the server's own stamp, and when: "now" never runs more than
        # CLOCK_TOLERANCE_SECONDS past it, whatever later answers say (they may come by another proxy, or from
        # another API server whose clock is ahead).
        self._checked: tuple[datetime, float] | None = None
        self._header, self._header_date = "", datetime.min.replace(tzinfo=UTC)

    def observe(self, date_header: str | None) -> None:
        """Record a response's Date header; one that cannot be parsed is ignored."""
        if not date_header:
            return
        if date_header == self._header:  # the same second as the last answer: parsed already
            server = self._header_date
        else:
            try:
                server = parsedate_to_datetime(date_header).astimezone(UTC)
            except (TypeError, ValueError, IndexError, OverflowError):
                return
            self._header, self._header_date = date_header, server
        self._seen, self.last_date = (server, self.monotonic()), server

    def check(self, stamp: datetime, date: datetime | None) -> None:
        """The Date header `date` of the answer that carried the API server's own `stamp` must agree with it."""
        if date is None:
            raise ServerClockUnknown("the API server's answers carry no Date header (a proxy between here and the "
                                     "API server may strip it); rwo-failover times every age on the server's clock "
                                     "and judges nothing without it")
        apart = (date - stamp).total_seconds()
        if abs(apart) > CLOCK_TOLERANCE_SECONDS:
            raise ServerClockUnknown(
                f"the Date header and the API server's own stamp on what it writes are {apart:+.0f}s apart: a proxy "
                "between here and the API server may send its own Date; rwo-failover times every age on the API "
                "server's clock and judges nothing while they disagree")
        self._checked = (date, self.monotonic())

    def _capped(self, now: datetime) -> datetime:
        if self._checked is None:
            return now
        date, at = self._checked
        return min(now, date + timedelta(seconds=CLOCK_TOLERANCE_SECONDS + self.monotonic() - at))

    @property
    def synced(self) -> bool:
        return self._seen is not None

    def now(self) -> datetime:
        """The server's time now."""
        if self._seen is None:
            raise ServerClockUnknown("the API server's answers carry no Date header (a proxy between here and the "
                                     "API server may strip it); rwo-failover times every age on the server's clock "
                                     "and judges nothing without it")
        server, at = self._seen
        return self._capped(server + timedelta(seconds=self.monotonic() - at))


class SharedServerClock(ServerClock):
    """Continuous mode's one view of the server's clock, fed by every response of every pass and watch.

    A Date header says the server's time was at least that (truncated to the second) when the response
    arrived, so each one is a lower bound, lagging the server by up to a second. Many responses, arriving at
    different fractions of a second, give a tighter one: the largest lower bound seen in the last
    WINDOW_SECONDS, carried forward on the monotonic clock (kept as a sliding-window maximum in bounded memory:
    any bound it lets go only makes "now" earlier). It is still never ahead of the server (beyond
    this machine's monotonic drift over that window), so ages are never overestimated; it only lets a
    decision that waits for a moment (Plan.wake_at) come up to a second sooner.

    A bound more than a second above the latest header cannot be one the server still agrees with: its clock
    stepped back, or the request reached another API server whose clock is behind. Such bounds are dropped,
    so the clock follows the latest header at once. As with ServerClock, until a response has carried a Date
    header there is no "now" at all: this process's own clock is never read.
    """

    WINDOW_SECONDS = 300.0
    MAX_BOUNDS = 64  # one a slice of the window: WINDOW_SECONDS / MAX_BOUNDS seconds

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        super().__init__(monotonic)
        # (server seconds minus monotonic seconds, monotonic), offsets strictly falling from the front and times
        # rising: a sliding-window maximum, so each response costs O(1) amortized (issue 25: rebuilding and
        # scanning one bound per response for 300 s was quadratic in the request rate). A bound no larger than a
        # newer one can never be the maximum while the newer one lives, so it is not kept.
        self._bounds: deque[tuple[float, float]] = deque()
        self._lock = threading.Lock()  # the watch threads and the pass observe at once

    def observe(self, date_header: str | None) -> None:
        with self._lock:
            seen = self._seen
            super().observe(date_header)
            if self._seen is seen or self._seen is None:
                return  # no header, or one that does not parse
            server, at = self._seen
            latest = server.timestamp() - at
            bounds = self._bounds
            # The oldest bound is at the front, and so is the largest: the ones out of the window or more than
            # a second above the latest header (a clock stepped back, another API server) go from there.
            while bounds and (at - bounds[0][1] > self.WINDOW_SECONDS or bounds[0][0] > latest + 1.0):
                bounds.popleft()
            while bounds and bounds[-1][0] <= latest:
                bounds.pop()
            # Bounded memory: one bound a slice of the window. A larger bound of this slice is kept instead
            # (it expires as early as this one would, or earlier); dropping this one only makes "now" less tight
            # after that one expires, never ahead.
            if not bounds or self._slice(bounds[-1][1]) != self._slice(at):
                bounds.append((latest, at))

    def _slice(self, at: float) -> int:
        return int(at // (self.WINDOW_SECONDS / self.MAX_BOUNDS))

    def now(self) -> datetime:
        with self._lock:
            offset = self._bounds[0][0] if self._bounds else None
        if offset is None:
            return super().now()  # raises ServerClockUnknown
        return self._capped(datetime.fromtimestamp(self.monotonic() + offset, UTC))
