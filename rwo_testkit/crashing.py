"""reconcile.py with a bug in it: the first CRASH_FIRST_PASSES passes raise, as a bug in rwo-failover would.

What a bug must end in (exit 70 with its traceback; the loop counting crashes in a row) needs a bug to test
it. Since issue 18 no input over HTTP reaches one: every object and every answer is read totally, and a bad
one is a skip or a judged failure. So the bug is put in here, by name, and never ships (import-linter keeps
rwo_testkit out of the runtime).

    python -m rwo_testkit.crashing        # with CRASH_FIRST_PASSES=N in the environment
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from rwo_failover.run import cli, runner


def observe_that_crashes(passes: int, real: Callable[..., Any] = runner.observe) -> Callable[..., Any]:
    """runner.observe, but the first `passes` calls raise RuntimeError."""
    left = [passes]

    def observe(*args: Any, **kwargs: Any) -> Any:
        if left[0] > 0:
            left[0] -= 1
            raise RuntimeError("a bug, simulated by rwo_testkit.crashing")
        return real(*args, **kwargs)
    return observe


if __name__ == "__main__":
    runner.observe = observe_that_crashes(int(os.environ.get("CRASH_FIRST_PASSES", "0")))
    sys.exit(cli.main())
