"""One back-off gate round list-and-watch, as client-go's reflector has (its backoff manager: 800 ms doubling
to 30 s, with jitter).

Every way a round of list-and-watch can fail goes through it: a watch the server closes within a second (an
empty 200 from a server shutting down behind a load balancer, a proxy that does not stream), a 410 Gone, an
error event, a dropped connection, a list that fails. Without one gate, some of those paths retried at once:
an empty-200 watch was reopened about 1,000 times a second, a 410 storm listed 78 times a second.
The gate resets only after a healthy watch (one that ran at least SHORT_WATCH_SECONDS): a list that succeeds
is no sign that the next watch will.
"""

from __future__ import annotations

import random
from collections.abc import Callable

INITIAL_SECONDS = 0.8
MAX_SECONDS = 30.0
JITTER = 0.5  # each wait is drawn from [delay, delay * 1.5), so many clients do not retry in step
SHORT_WATCH_SECONDS = 1.0  # a watch that ends sooner counts as a failure (client-go: "very short watch")


class Backoff:
    """The wait before each retry after a failure; doubling, capped, reset by a healthy watch."""

    def __init__(self, rand: Callable[[], float] = random.random) -> None:
        self.rand = rand
        self.delay = INITIAL_SECONDS
        self.failures = 0  # in a row, since the last healthy watch

    def failed(self) -> float:
        """One more failure: the seconds to wait before the next try."""
        wait = self.delay * (1 + JITTER * self.rand())
        self.delay = min(self.delay * 2, MAX_SECONDS)
        self.failures += 1
        return wait

    def healthy(self) -> int:
        """A healthy watch: the next failure waits INITIAL_SECONDS again. Returns the failures it ends."""
        ended, self.failures, self.delay = self.failures, 0, INITIAL_SECONDS
        return ended
