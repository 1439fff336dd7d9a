"""What a failed round of list-and-watch was (kube/reflector.py): the reason it is counted and logged under,
its detail, and the reason to list again before the next watch ("" to resume from the last version seen)."""

from __future__ import annotations

import logging

import urllib3
from kubernetes.client.exceptions import ApiException

from .errors import ApiError

log = logging.getLogger(__name__)


def watch_failure(err: Exception, relist: str, *, stale_seconds: float, resource: str) -> tuple[str, str, str]:
    """(reason, detail, the reason to list again) for `err`, which ended a round that began with a list when
    `relist` names one. An error of no kind a watch expects is logged with its traceback: call it while handling
    `err`."""
    if isinstance(err, ApiException):  # an ERROR event in the stream
        if err.status == 410:
            return "expired", "410 Gone", "expired"
        return "error", f"HTTP {err.status} {err.reason or ''}".strip(), "error"
    if isinstance(err, urllib3.exceptions.ReadTimeoutError):
        return "stalled", f"silent for {stale_seconds}s", "stale"
    if isinstance(err, (urllib3.exceptions.HTTPError, ConnectionError, OSError)):
        return ("list failed", str(err), relist) if relist else ("dropped", f"{type(err).__name__}: {err}", "")
    if isinstance(err, ApiError):
        if err.status == 410:
            return "expired", str(err), "expired"
        return ("list failed" if relist else "error"), str(err), relist or "error"
    log.exception("watch failed; resuming", extra={"resource": resource})
    return "error", f"{type(err).__name__}: {err}", "error"
