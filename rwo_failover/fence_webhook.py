"""FENCING=webhook: ask an outside fencer (a BMC/IPMI bridge, a cloud's "instance stopped" check, a runbook
service) to fence a node, and believe only a clear yes.

POST JSON {node, uid, providerID, addresses, taint, reason} to FENCE_WEBHOOK_URL. Only a 2xx answer to that
POST whose JSON body is {"fenced": true, "node": <the node asked about>, "uid": <its uid>} means fenced;
anything else, a timeout included, means not fenced. A redirect is never followed (a 3xx is a failed fence,
named): so the request, and its token, go to the configured host only. TLS is always verified
(FENCE_WEBHOOK_CA_FILE, or the system's CAs); the bearer token is read from FENCE_WEBHOOK_TOKEN_FILE at each
call (so a rotated token is picked up) and never logged. Connection errors, timeouts and 5xx/429 are retried
within API_MAX_ATTEMPTS and the pass deadline, as API calls are.
"""

from __future__ import annotations

import json
import logging
import ssl
import urllib.error
import urllib.request
from typing import Callable, Optional

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from .config import Settings, without_userinfo

log = logging.getLogger("rwo_failover")
MAX_ANSWER_BYTES = 65536


class _Retryable(Exception):
    """A timeout, a refused connection, or a 5xx/429: worth another attempt."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx comes back as an HTTPError: it is never followed, so nothing, the token included, is ever sent
    anywhere but FENCE_WEBHOOK_URL."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def judge_answer(status: int, body: bytes, asked: dict) -> tuple[bool, str]:
    """(True, "") only for a 2xx JSON answer {"fenced": true, "node": ..., "uid": ...} naming the node and uid
    that were asked about; (False, why) for anything else, whatever it holds."""
    if not 200 <= status <= 299:
        return False, f"HTTP {status} from the fence webhook"
    try:
        answer = json.loads(body or b"{}")
    except (ValueError, RecursionError):
        return False, f"HTTP {status}, but the body is not JSON"
    if not isinstance(answer, dict) or answer.get("fenced") is not True:
        return False, f"HTTP {status}, but the answer is not {{\"fenced\": true}} with the node and uid asked about"
    if answer.get("node") != asked.get("node") or answer.get("uid") != asked.get("uid"):
        return False, (f"HTTP {status} fenced, but the answer does not name node {asked.get('node')!r} with uid "
                       f"{asked.get('uid')!r}, as asked")
    return True, ""

def _context(ca_file: Optional[str]) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()


def _headers(token_file: Optional[str]) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "rwo-failover"}
    if token_file:
        with open(token_file, encoding="utf-8") as handle:
            headers["Authorization"] = f"Bearer {handle.read().strip()}"
    return headers


def _opener(ca_file: Optional[str]) -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(urllib.request.HTTPSHandler(context=_context(ca_file)), _NoRedirects())


def _attempt(url: str, payload: bytes, asked: dict, settings: Settings, timeout: float) -> tuple[bool, str]:
    request = urllib.request.Request(url, data=payload, headers=_headers(settings.fence_webhook_token_file),
                                     method="POST")
    try:
        with _opener(settings.fence_webhook_ca_file).open(request, timeout=timeout) as ans:
            body = ans.read(MAX_ANSWER_BYTES)
            status = ans.status
    except urllib.error.HTTPError as err:
        if err.code == 429 or err.code >= 500:
            raise _Retryable(f"HTTP {err.code}") from None
        if 300 <= err.code <= 399:
            where = without_userinfo(str(err.headers.get("Location") or "nowhere"))[:200]
            return False, f"HTTP {err.code} from the fence webhook, a redirect to {where}: redirects are never followed"
        return False, f"HTTP {err.code} from the fence webhook"
    except ssl.SSLError as err:
        return False, f"TLS verification of the fence webhook failed: {err.reason or err}"
    except urllib.error.URLError as err:
        if isinstance(err.reason, ssl.SSLError):
            return False, f"TLS verification of the fence webhook failed: {err.reason.reason or err.reason}"
        raise _Retryable(f"cannot reach the fence webhook: {err.reason}") from None
    except (TimeoutError, OSError) as err:
        raise _Retryable(f"fence webhook: {type(err).__name__}: {err}") from None
    return judge_answer(status, body, asked)


def fence(payload: dict, settings: Settings, remaining: Callable[[], float],
          sleep: Callable[[float], None]) -> tuple[bool, str]:
    """(True, "") when the webhook confirmed; (False, why) otherwise. Never raises for the answer."""
    body = json.dumps(payload).encode()
    retrying = Retrying(stop=stop_after_attempt(settings.api_max_attempts) |
                        (lambda state: remaining() - state.upcoming_sleep <= 0),
                        wait=wait_exponential_jitter(multiplier=0.2, max=5.0, jitter=0.2),
                        retry=retry_if_exception(lambda err: isinstance(err, _Retryable)), sleep=sleep, reraise=True)
    try:
        return retrying(lambda: _attempt(settings.fence_webhook_url, body, payload, settings,
                                         max(0.05, min(settings.request_timeout_seconds, remaining()))))
    except _Retryable as err:
        return False, f"{err} (after {retrying.statistics.get('attempt_number', 1)} attempt(s))"
    except OSError as err:  # the token file vanished since start-up, say
        return False, f"cannot prepare the fence webhook call: {err}"
