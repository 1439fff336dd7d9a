"""FENCING=webhook: ask an outside fencer (a BMC/IPMI bridge, a cloud's "instance stopped" check, a runbook
service) to fence a node, and believe only a clear yes.

POST JSON {node, uid, providerID, addresses, taint, reason} to FENCE_WEBHOOK_URL. Only a 2xx answer whose
JSON body has "fenced": true means fenced; anything else, a timeout included, means not fenced. TLS is
always verified (FENCE_WEBHOOK_CA_FILE, or the system's CAs); the bearer token is read from
FENCE_WEBHOOK_TOKEN_FILE at each call (so a rotated token is picked up) and never logged. Connection
errors, timeouts and 5xx/429 are retried within API_MAX_ATTEMPTS and the pass deadline, as API calls are.
"""

from __future__ import annotations

import json
import logging
import ssl
import urllib.error
import urllib.request
from typing import Callable, Optional

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from .config import Settings

log = logging.getLogger("rwo_failover")


class _Retryable(Exception):
    """A timeout, a refused connection, or a 5xx/429: worth another attempt."""


def _context(ca_file: Optional[str]) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()


def _headers(token_file: Optional[str]) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "rwo-failover"}
    if token_file:
        with open(token_file, encoding="utf-8") as handle:
            headers["Authorization"] = f"Bearer {handle.read().strip()}"
    return headers


def _attempt(url: str, payload: bytes, settings: Settings, timeout: float) -> tuple[bool, str]:
    request = urllib.request.Request(url, data=payload, headers=_headers(settings.fence_webhook_token_file),
                                     method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=_context(settings.fence_webhook_ca_file)) as ans:
            body = ans.read(65536)
            status = ans.status
    except urllib.error.HTTPError as err:
        if err.code == 429 or err.code >= 500:
            raise _Retryable(f"HTTP {err.code}") from None
        return False, f"HTTP {err.code} from the fence webhook"
    except ssl.SSLError as err:
        return False, f"TLS verification of the fence webhook failed: {err.reason or err}"
    except urllib.error.URLError as err:
        if isinstance(err.reason, ssl.SSLError):
            return False, f"TLS verification of the fence webhook failed: {err.reason.reason or err.reason}"
        raise _Retryable(f"cannot reach the fence webhook: {err.reason}") from None
    except (TimeoutError, OSError) as err:
        raise _Retryable(f"fence webhook: {type(err).__name__}: {err}") from None
    try:
        answer = json.loads(body or b"{}")
    except ValueError:
        return False, f"HTTP {status}, but the body is not JSON"
    if isinstance(answer, dict) and answer.get("fenced") is True:
        return True, ""
    return False, f"HTTP {status}, but the answer is not {{\"fenced\": true}}"


def fence(payload: dict, settings: Settings, remaining: Callable[[], float],
          sleep: Callable[[float], None]) -> tuple[bool, str]:
    """(True, "") when the webhook confirmed; (False, why) otherwise. Never raises for the answer."""
    body = json.dumps(payload).encode()
    retrying = Retrying(stop=stop_after_attempt(settings.api_max_attempts) |
                        (lambda state: remaining() - state.upcoming_sleep <= 0),
                        wait=wait_exponential_jitter(multiplier=0.2, max=5.0, jitter=0.2),
                        retry=retry_if_exception(lambda err: isinstance(err, _Retryable)), sleep=sleep, reraise=True)
    try:
        return retrying(lambda: _attempt(settings.fence_webhook_url, body, settings,
                                         max(0.05, min(settings.request_timeout_seconds, remaining()))))
    except _Retryable as err:
        return False, f"{err} (after {retrying.statistics.get('attempt_number', 1)} attempt(s))"
    except OSError as err:  # the token file vanished since start-up, say
        return False, f"cannot prepare the fence webhook call: {err}"
