"""Issue 25, items 3-5: nothing spins, whatever the watch traffic. Each test measures CPU time over a bounded
window (or counts requests) and asserts a generous bound; the figures at scale are bench/steady.py's."""

from __future__ import annotations

import threading
import time

from rwo_failover.run.loop import MIN_GAP_SECONDS, StopFlag, Trigger, _wait_for_reason


def test_the_loop_sleeps_while_a_burst_settles_and_between_passes():
    """A taint flapping every 0.15 s never lets a burst go quiet for DEBOUNCE_SECONDS: the loop waited for it,
    and for MIN_GAP_SECONDS after each pass, by spinning (95% of a core). Now its thread sleeps."""
    trigger, flag, done = Trigger(), StopFlag(), threading.Event()

    def flap() -> None:
        while not done.is_set():
            trigger.fire("nodes a modified")
            time.sleep(0.15)
    threading.Thread(target=flap, daemon=True).start()
    began, cpu, passes = time.monotonic(), time.thread_time(), []
    last = time.monotonic()
    try:
        while time.monotonic() - began < 4:
            passes.append(_wait_for_reason(flag, trigger, last, None, 300.0, None))
            trigger.take()
            assert time.monotonic() - last >= MIN_GAP_SECONDS
            last = time.monotonic()
    finally:
        done.set()
    spent = time.thread_time() - cpu
    assert spent < 0.2, f"the waiting thread used {spent:.2f}s of CPU in 4 s"
    assert set(passes) == {"change"} and 2 <= len(passes) <= 8, passes
