"""Continuous mode: a pass every INTERVAL seconds until SIGTERM or SIGINT."""

from __future__ import annotations

import logging
import signal
import time
from types import FrameType
from typing import Callable, Optional

from . import logs
from .config import Settings
from .exitcodes import EXIT_CONFIG, EXIT_FAILED, EXIT_OK
from .health import HealthServer, Liveness
from .leader import LeaderElector
from .metrics import Metrics

log = logging.getLogger(logs.LOGGER)
MAX_CRASHES_IN_A_ROW = 5  # then exit 1, so Kubernetes restarts the process: something is persistently wrong
SLEEP_SLICE_SECONDS = 0.1  # how soon a stop request is noticed between passes


class StopFlag:
    """Set by the signal handler, read by the loop.

    The handler only assigns an attribute: it takes no lock, so it cannot deadlock on one the interrupted
    code holds (a logging handler's, a threading.Event's). The loop does the logging.
    """

    def __init__(self) -> None:
        self.requested: Optional[int] = None

    def request(self, signum: int, _frame: Optional[FrameType]) -> None:
        self.requested = signum

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self.request)

    def sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while self.requested is None and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(SLEEP_SLICE_SECONDS, left))


def run_loop(one_pass: Callable[[], int], settings: Settings, flag: Optional[StopFlag] = None,
             elector: Optional[LeaderElector] = None, metrics: Optional[Metrics] = None) -> int:
    """Passes until a stop signal, then exit 0; exit 1 after MAX_CRASHES_IN_A_ROW passes crashed.

    A signal never interrupts a pass: it is finished (within PASS_TIMEOUT_SECONDS), so no pod is left
    deleted with its attachment still in place. Each pass has its own deadline. A pass that raises is
    logged with its traceback and the loop goes on: one odd object must not stop every later failover.
    With an elector, only the leader passes; on stop it releases the Lease after the pass in flight.
    """
    flag = flag or StopFlag()
    flag.install()
    log.info("continuous mode", extra={"interval_seconds": settings.interval, "leader_election": bool(elector)})
    liveness = Liveness(3 * settings.interval + settings.pass_timeout_seconds)
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
        return _passes(one_pass, settings, flag, elector, liveness)
    finally:
        if elector:
            elector.stop()
        if server:
            server.stop()


def _passes(one_pass: Callable[[], int], settings: Settings, flag: StopFlag, elector: Optional[LeaderElector],
            liveness: Liveness) -> int:
    crashes = 0
    while flag.requested is None:
        if elector and not elector.leading:
            if elector.last_round_ok:  # a healthy standby is alive and ready, though it does not pass
                liveness.progressed()
            flag.sleep(SLEEP_SLICE_SECONDS * 5)  # standby: check again soon, to pass as soon as we lead
            continue
        try:
            one_pass()
            liveness.progressed()
            crashes = 0
        except Exception:  # noqa: BLE001 - logged with its traceback; the loop must outlive one bad pass
            crashes += 1
            if crashes >= MAX_CRASHES_IN_A_ROW:
                log.exception(f"{crashes} passes crashed in a row; exiting so Kubernetes restarts the process")
                return EXIT_FAILED
            log.exception("pass crashed; continuing", extra={"crashes_in_a_row": crashes})
        flag.sleep(settings.interval)
    log.info("stop requested; the pass in flight has finished", extra={"signal": signal.Signals(flag.requested).name})
    log.info("stopped cleanly")
    return EXIT_OK
