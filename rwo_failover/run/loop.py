"""Continuous mode: passes until SIGTERM or SIGINT; triggered by the watches, or every INTERVAL seconds.

With WATCH=true (the default) passes are triggered, not scheduled: a watched change that matters (kube/sources.py),
the moment time alone changes a verdict (Plan.wake_at), or INTERVAL since the last pass, whichever comes
first. A burst of changes (a mass outage) is one pass: the loop waits until the changes pause for
DEBOUNCE_SECONDS, at most MAX_DEBOUNCE_SECONDS. With WATCH=false it lists and passes every INTERVAL.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType

from ..kube import WatchedCluster
from ..kube.leader import LeaderElector
from ..settings import Settings
from .exitcodes import EXIT_CONFIG, EXIT_FAILED, EXIT_OK
from .health import HealthServer, Liveness
from .metrics import Metrics

log = logging.getLogger(__name__)
MAX_CRASHES_IN_A_ROW = 5  # then exit 1, so Kubernetes restarts the process: something is persistently wrong
SLEEP_SLICE_SECONDS = 0.1  # how soon a stop request is noticed between passes
DEBOUNCE_SECONDS = 0.2  # a burst of changes is one pass: wait until they pause this long...
MAX_DEBOUNCE_SECONDS = 1.0  # ...but never longer than this after the first one
MIN_GAP_SECONDS = 0.5  # between passes, so the echoes of our own writes cannot spin the loop
WAKE_MARGIN_SECONDS = 0.05  # past wake_at, so the verdict has surely changed when the pass judges it
STOP_CHECK_SECONDS = 0.5  # between triggered passes, how soon a stop request is noticed


class Trigger:
    """Changes that call for a pass: fired from the watch threads, taken by the loop."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.monotonic = monotonic
        self.fired = threading.Event()  # set by every change, so the waiting loop looks at once
        self._lock = threading.Lock()
        self._reasons: list[str] = []
        self._first: float | None = None
        self._last: float | None = None

    def fire(self, reason: str) -> None:
        with self._lock:
            if len(self._reasons) < 20:  # enough to log what started a pass; a mass outage is counted, not kept
                self._reasons.append(reason)
            now = self.monotonic()
            self._first = self._first if self._first is not None else now
            self._last = now
            self.fired.set()  # under the lock, as take() clears it: set exactly while a change is pending

    def settles_at(self) -> float | None:
        """When the pending burst is over (quiet for DEBOUNCE_SECONDS, or MAX_DEBOUNCE_SECONDS old), on the
        monotonic clock; None when no change is pending. A later change can only postpone it."""
        with self._lock:
            if self._first is None or self._last is None:
                return None
            return min(self._last + DEBOUNCE_SECONDS, self._first + MAX_DEBOUNCE_SECONDS)

    def settled(self) -> bool:
        """A change is pending and the burst is over."""
        at = self.settles_at()
        return at is not None and self.monotonic() >= at

    def take(self) -> list[str]:
        with self._lock:
            self.fired.clear()
            reasons, self._reasons, self._first, self._last = self._reasons, [], None, None
            return reasons


class StopFlag:
    """Set by the signal handler, read by the loop.

    The handler only assigns an attribute: it takes no lock, so it cannot deadlock on one the interrupted
    code holds (a logging handler's, a threading.Event's). The loop does the logging.
    """

    def __init__(self) -> None:
        self.requested: int | None = None

    def request(self, signum: int, _frame: FrameType | None) -> None:
        self.requested = signum

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self.request)

    def sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while self.requested is None and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(SLEEP_SLICE_SECONDS, left))


def run_loop(one_pass: Callable[[], float | None], settings: Settings, flag: StopFlag | None = None,
             *, elector: LeaderElector | None = None, metrics: Metrics | None = None,
             watched: tuple[WatchedCluster, Trigger] | None = None) -> int:
    """Passes until a stop signal, then exit 0; exit 1 after MAX_CRASHES_IN_A_ROW passes crashed.

    A signal never interrupts a pass: it is finished (within PASS_TIMEOUT_SECONDS), so no pod is left
    deleted with its attachment still in place. Each pass has its own deadline. A pass that raises is
    logged with its traceback and the loop goes on: one odd object must not stop every later failover.
    With an elector, only the leader passes; on stop it releases the Lease after the pass in flight.
    With `watched` (the watches and their trigger), `one_pass` returns the seconds until time alone changes
    a verdict (None: only a change can), and passes are triggered (see the module's docstring).
    """
    flag = flag or StopFlag()
    flag.install()
    log.info("continuous mode", extra={"interval_seconds": settings.interval, "leader_election": bool(elector),
                                       "watch": bool(watched)})
    liveness = Liveness(3 * settings.interval + settings.pass_timeout_seconds)
    if metrics:
        liveness.paused = lambda: metrics.pause_reason
    if watched:
        liveness.stuck, liveness.behind = watched[0].stuck, watched[0].behind
    if elector:
        liveness.behind = _either(liveness.behind, elector.unanswered)
    try:
        server = HealthServer(settings.metrics_port, metrics.registry, liveness).start() \
            if metrics and settings.metrics_port else None
    except OSError as err:
        log.error("cannot serve /metrics, /healthz and /readyz", extra={"setting": "METRICS_PORT",
                                                                         "port": settings.metrics_port,
                                                                         "error": str(err)})
        return EXIT_CONFIG
    if elector:
        elector.start()
    try:
        if watched:
            cluster, trigger = watched
            return _triggered_passes(one_pass, settings, flag, elector=elector, liveness=liveness,
                                     metrics=metrics, cluster=cluster, trigger=trigger)
        return _passes(one_pass, settings, flag, elector=elector, liveness=liveness)
    finally:
        if elector:  # first: the standby takes over at once, however long a watch thread takes to end
            elector.stop()
        if watched and watched[0].running:
            watched[0].stop()
        if server:
            server.stop()


def _either(*reasons: Callable[[], str | None]) -> Callable[[], str | None]:
    """The first reason any of them gives."""
    return lambda: next((why for why in (reason() for reason in reasons) if why), None)


def _standing_by(elector: LeaderElector | None, liveness: Liveness, flag: StopFlag) -> bool:
    """True (after a short sleep) while another replica leads."""
    if elector is None or elector.leading:
        return False
    if elector.turned_at is not None:  # a standby whose election loop turns is alive, though it does not pass
        liveness.progressed(elector.turned_at)
    flag.sleep(SLEEP_SLICE_SECONDS * 5)  # standby: check again soon, to pass as soon as we lead
    return True


class _Crashes:
    """Counts passes that raised in a row; the loop gives up after MAX_CRASHES_IN_A_ROW."""

    def __init__(self) -> None:
        self.in_a_row = 0

    def run(self, one_pass: Callable[[], float | None], liveness: Liveness) -> tuple[bool, float | None]:
        """(go on, what the pass returned)."""
        try:
            found = one_pass()
        except Exception:
            self.in_a_row += 1
            if self.in_a_row >= MAX_CRASHES_IN_A_ROW:
                log.exception(f"{self.in_a_row} passes crashed in a row; exiting so Kubernetes restarts the process")
                return False, None
            log.exception("pass crashed; continuing", extra={"crashes_in_a_row": self.in_a_row})
            return True, None
        liveness.progressed()
        self.in_a_row = 0
        return True, found


def _stopped(flag: StopFlag) -> int:
    assert flag.requested is not None
    log.info("stop requested; the pass in flight has finished", extra={"signal": signal.Signals(flag.requested).name})
    log.info("stopped cleanly")
    return EXIT_OK


def _passes(one_pass: Callable[[], float | None], settings: Settings, flag: StopFlag,
            *, elector: LeaderElector | None, liveness: Liveness) -> int:
    crashes = _Crashes()
    while flag.requested is None:
        if _standing_by(elector, liveness, flag):
            continue
        if not crashes.run(one_pass, liveness)[0]:
            return EXIT_FAILED
        flag.sleep(settings.interval)
    return _stopped(flag)


def _triggered_passes(one_pass: Callable[[], float | None], settings: Settings, flag: StopFlag,
                      *, elector: LeaderElector | None, liveness: Liveness, metrics: Metrics | None,
                      cluster: WatchedCluster, trigger: Trigger) -> int:
    """A pass when a watched change settles, at the plan's wake_at, or INTERVAL after the last, whichever is
    first. A standby keeps no cache: its watches stop, and start again (with a list) once it leads, as
    kube-controller-manager starts its informers only once elected."""
    crashes = _Crashes()
    last: float | None = None
    wake: float | None = None
    while flag.requested is None:
        if _standing_by(elector, liveness, flag):
            if cluster.running:
                cluster.stop()
                log.info("standing by: watches stopped, cache dropped")
            continue
        if not cluster.running:
            cluster.start()
            last, wake = None, None
        why = _wait_for_reason(flag, trigger, last, wake=wake, interval=settings.interval, elector=elector)
        if why is None:
            continue
        changes = trigger.take()
        if metrics:
            metrics.triggers.labels(why).inc()
        log.info("pass triggered", extra={"trigger": why, "changes": changes})
        last = time.monotonic()
        go_on, until_wake = crashes.run(one_pass, liveness)
        if not go_on:
            return EXIT_FAILED
        wake = None if until_wake is None else time.monotonic() + max(0.0, until_wake) + WAKE_MARGIN_SECONDS
    return _stopped(flag)


def _wait_for_reason(flag: StopFlag, trigger: Trigger, last: float | None, *, wake: float | None,
                     interval: float, elector: LeaderElector | None) -> str | None:
    """Sleep until a pass is due, and say why: start, change, wake or interval. None when interrupted (a
    stop request, or leadership lost)."""
    if last is None:
        return "start"
    while flag.requested is None and (elector is None or elector.leading):
        now = time.monotonic()
        gap_over = last + MIN_GAP_SECONDS
        if now >= gap_over:
            if wake is not None and now >= wake:
                return "wake"
            if trigger.settled():
                return "change"
            if now - last >= interval:
                return "interval"
        due = max(gap_over, min(last + interval, wake if wake is not None else float("inf")))
        settles = trigger.settles_at()
        if settles is None:
            # Nothing pending: woken by the first change at once, in the gap after a pass too (a whole slice
            # asleep there took up a change 0.3 s late). (A signal handler cannot set the event, it takes no
            # lock: every half second at most, to notice a stop request or lost leadership.)
            trigger.fired.wait(max(0.0, min(due - now, STOP_CHECK_SECONDS)))
        else:
            # A burst settling: a change now can only postpone the pass, so sleep to the moment it may be due
            # instead of waking at each change (a flapping taint spun a core).
            due = min(due, max(settles, gap_over))
            time.sleep(max(0.0, min(due - now, STOP_CHECK_SECONDS)))
    return None
