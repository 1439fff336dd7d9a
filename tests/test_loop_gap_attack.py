"""Issue 25 attack (loops): the loop sleeps instead of spinning, but in the gap after a pass
(MIN_GAP_SECONDS) with nothing pending it slept whole STOP_CHECK_SECONDS slices, past the gap's end, deaf to a
change: a change that came just after a pass was taken up to 0.3 s after it had settled (in a reaction budget
of a second). A first change can wake the wait at once without spinning: after it, the burst is pending and
the loop sleeps to the moment it settles."""

from __future__ import annotations

import threading
import time

from rwo_failover.run.loop import DEBOUNCE_SECONDS, MIN_GAP_SECONDS, StopFlag, Trigger, _wait_for_reason


def test_a_change_in_the_gap_after_a_pass_is_taken_up_when_it_settles():
    trigger, flag = Trigger(), StopFlag()
    last = time.monotonic() - (MIN_GAP_SECONDS - 0.1)  # a pass that took 0.4 s has just ended
    fired_at = []

    def change() -> None:
        time.sleep(0.03)
        fired_at.append(time.monotonic())
        trigger.fire("nodes a modified")
    threading.Thread(target=change, daemon=True).start()
    cpu = time.thread_time()
    why = _wait_for_reason(flag, trigger, last, wake=None, interval=300.0, elector=None)
    late = time.monotonic() - max(fired_at[0] + DEBOUNCE_SECONDS, last + MIN_GAP_SECONDS)
    assert why == "change"
    assert late < 0.1, f"taken up {late:.2f}s after the change settled"
    assert time.thread_time() - cpu < 0.05, "and without spinning"
