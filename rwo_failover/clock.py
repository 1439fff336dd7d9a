"""The API server's clock, as this pass sees it.

Every age the pass judges compares a server timestamp (a managedFields time) with "now". Taking "now" from
this process would make a Job whose clock runs 90 s fast see a heartbeating node as dead. So "now" is the
`Date` header of the latest API response, plus the monotonic time elapsed since it arrived. `Date` has
one-second resolution and is truncated, so this clock runs up to a second *behind* the server's: ages come
out up to a second short, which only ever delays a verdict of "down". Until a response has carried a Date
header there is no "now" at all: `now()` raises, and nothing is judged.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import Callable, Optional


class ServerClockUnknown(Exception):
    """No API response has carried a Date header that parses (a proxy may strip it)."""


class ServerClock:
    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.monotonic = monotonic
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
        """The server's time now."""
        if self._seen is None:
            raise ServerClockUnknown("the API server's answers carry no Date header (a proxy between here and the "
                                     "API server may strip it); rwo-failover times every age on the server's clock "
                                     "and judges nothing without it")
        server, at = self._seen
        return server + timedelta(seconds=self.monotonic() - at)
