"""Every log line a test session produces, in one place, so one test can grep them all for planted secrets.

In-process lines come from a handler on the rwo_failover logger, the parent of every module's logger
(`logs.setup` replaces only its own handler at each run, so this one stays), and from a handler on the root
logger (the kubernetes client, urllib3, tenacity).
Output of the processes tests start (reconcile.py in a subprocess, the e2e tier) is added with `add`.
`SESSION` is the session's sink (tests/conftest.py installs it); `plant` registers a secret that no line of
it may contain (tests/test_secrets.py checks, last).
"""

from __future__ import annotations

import logging
import threading

from rwo_failover.run.logs import LOGGER

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


def render(record: logging.LogRecord) -> str:
    """The message, every extra field and the traceback: all that any formatter could print."""
    try:
        text = record.getMessage()
    except (TypeError, ValueError):  # a bad %-format is still text to grep
        text = f"{record.msg} {record.args}"
    extras = " ".join(f"{k}={v}" for k, v in record.__dict__.items() if k not in _STANDARD)
    parts = [record.levelname, text, extras]
    if record.exc_info:
        parts.append(logging.Formatter().formatException(record.exc_info))
    if record.stack_info:
        parts.append(record.stack_info)
    return " ".join(p for p in parts if p)


class LogSink(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._handler = _RootHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self._keep(render(record))

    def add(self, text: str) -> None:
        """Output of a process a test started."""
        for line in text.splitlines():
            if line.strip():
                self._keep(line)

    def _keep(self, line: str) -> None:
        with self._lock:
            self.lines.append(line)

    def install(self) -> None:
        logging.getLogger(LOGGER).addHandler(self)
        logging.getLogger().addHandler(self._handler)


class _RootHandler(logging.Handler):
    def __init__(self, sink: LogSink) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.split(".")[0] != LOGGER:  # ours reach the sink on LOGGER already (before setup, here too)
            self.sink._keep(render(record))


SESSION = LogSink()
_PLANTED: set[str] = set()


def plant(secret: str) -> str:
    """Register a secret handed to the code under test; no log line of the session may contain it."""
    _PLANTED.add(secret)
    return secret


def planted_secrets() -> frozenset[str]:
    return frozenset(_PLANTED)
