"""Structured logs: JSON lines for machines, a readable line for people at a TTY."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import IO

from pythonjsonlogger.json import JsonFormatter

LOGGER = "rwo_failover"  # the parent of every module's logger (logging.getLogger(__name__)): setup configures it
_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class TextFormatter(logging.Formatter):
    """`time LEVEL message key=value ...`, the extras in the order they were given."""

    def format(self, record: logging.LogRecord) -> str:
        base = f"{self.formatTime(record, '%H:%M:%S')} {record.levelname:<7} {record.getMessage()}"
        extras = " ".join(f"{k}={v}" for k, v in record.__dict__.items() if k not in _STANDARD)
        return f"{base} {extras}" if extras else base


class UtcJsonFormatter(JsonFormatter):
    """JSON lines whose `time` is RFC 3339 in UTC with milliseconds (2026-11-22T20:25:29.123Z): log stores
    parse it as is, and it never depends on the node's time zone."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        return stamp.replace("+00:00", "Z")


class _Lines(logging.StreamHandler[IO[str]]):
    """The handler setup installs: the one it replaces when it runs again (for each run in one process)."""


def setup(log_format: str, level: str, stream: IO[str]) -> logging.Logger:
    """Every module's lines (their loggers are children of LOGGER) to `stream`, at `level`, and nowhere else. A
    handler someone else added to LOGGER stays: only setup's own is replaced."""
    use_text = log_format == "text" or (log_format == "auto" and stream.isatty())
    handler = _Lines(stream)
    handler.setFormatter(TextFormatter() if use_text else UtcJsonFormatter(
        "%(asctime)s %(levelname)s %(message)s",
        rename_fields={"asctime": "time", "levelname": "level"}, timestamp=False))
    logger = logging.getLogger(LOGGER)
    logger.handlers[:] = [h for h in logger.handlers if not isinstance(h, _Lines)] + [handler]
    logger.setLevel(level)
    logger.propagate = False
    return logger
