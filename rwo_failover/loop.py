"""Continuous mode: a pass every INTERVAL seconds until SIGTERM or SIGINT."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Callable

from . import logs
from .config import Settings
from .exitcodes import EXIT_OK

log = logging.getLogger(logs.LOGGER)


def run_loop(one_pass: Callable[[], int], settings: Settings) -> int:
    """Passes until a stop signal, then exit 0.

    A signal never interrupts a pass: it is finished (within PASS_TIMEOUT_SECONDS), so no
    pod is left deleted with its attachment still in place. Each pass has its own deadline.
    """
    stop = threading.Event()

    def request_stop(signum: int, _frame: object) -> None:
        log.info("stop requested; finishing the pass in flight", extra={"signal": signal.Signals(signum).name})
        stop.set()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, request_stop)
    log.info("continuous mode", extra={"interval_seconds": settings.interval})
    while not stop.is_set():
        one_pass()
        stop.wait(settings.interval)
    log.info("stopped cleanly")
    return EXIT_OK
