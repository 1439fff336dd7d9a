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
