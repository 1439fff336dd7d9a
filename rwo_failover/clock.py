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
stamp (`check`): the two must agree within CLOCK_TOLERANCE_SECONDS, or nothing is judged.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import Callable, Optional

# Both the Date header and the server's stamps are whole seconds, truncated, taken a few milliseconds apart.
CLOCK_TOLERANCE_SECONDS = 2.0


class ServerClockUnknown(Exception):
    """No API response has carried a Date header that parses (a proxy may strip it)."""


class ServerClock:
    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.monotonic = monotonic
        self._seen: Optional[tuple[datetime, float]] = None
        self.last_date: Optional[datetime] = None  # the Date header of the latest answer that carried one

    def observe(self, date_header: Optional[str]) -> None:
        """Record a response's Date header; one that cannot be parsed is ignored."""
        if not date_header:
            return
        try:
            server = parsedate_to_datetime(date_header).astimezone(timezone.utc)
        except (TypeError, ValueError, IndexError, OverflowError):
            return
        self._seen, self.last_date = (server, self.monotonic()), server

    def check(self, stamp: datetime, date: Optional[datetime]) -> None:
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
        return server + timedelta(seconds=self.monotonic() - at)
