"""FENCING=webhook: ask an outside fencer (a BMC/IPMI bridge, a cloud's "instance stopped" check, a runbook
service) to fence a node, and believe only a clear yes.

POST JSON {node, uid, providerID, addresses, taint, reason} to FENCE_WEBHOOK_URL. Only a 2xx answer to that
POST whose JSON body is {"fenced": true, "node": <the node asked about>, "uid": <its uid>} means fenced;
anything else, a timeout included, means not fenced. A redirect is never followed (a 3xx is a failed fence,
named): so the request, and its token, go to the configured host only. TLS is always verified
(FENCE_WEBHOOK_CA_FILE, or the system's CAs); the bearer token is read from FENCE_WEBHOOK_TOKEN_FILE at each
call (so a rotated token is picked up) and never logged. Connection errors, timeouts and 5xx/429 are retried
within API_MAX_ATTEMPTS and the pass deadline, as API calls are, and never once the Writer's guard says no
write may start.
"""

from __future__ import annotations

import http.client
import json
import logging
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from ..kube import WriteStopped
from ..kube.deadline_http import DeadlineHTTPS
from ..model import Json
from ..settings import Settings, TokenError, read_bearer_token
from ..settings.urls import without_userinfo

log = logging.getLogger(__name__)
MAX_ANSWER_BYTES = 65536
PAST_DEADLINE = "no complete answer before the pass deadline (PASS_TIMEOUT_SECONDS)"


class _Retryable(Exception):
    """A timeout, a refused connection, or a 5xx/429: worth another attempt. `unanswered` when the request may
    have reached the fencer and no answer came (a timeout, a reset, an answer cut short): it may have fenced."""

    def __init__(self, message: str, unanswered: bool = True) -> None:
        super().__init__(message)
        self.unanswered = unanswered


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx comes back as an HTTPError: it is never followed, so nothing, the token included, is ever sent
    anywhere but FENCE_WEBHOOK_URL."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def judge_answer(status: int, body: bytes, asked: Json) -> tuple[bool, str]:
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

def _context(ca_file: str | None) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()


def ca_file_problem(path: str) -> str | None:
    """Why the CA file at `path` cannot verify the webhook (None when it holds a certificate ssl loads): asked at
    start-up, with the parser the calls use, so a token mounted at the wrong path is exit 2 naming the setting,
    not a TLS error on every fence that blames the fencer. Never quotes the file: it may hold a secret."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.load_verify_locations(cafile=path)
    except OSError as err:  # ssl.SSLError is one: no PEM block, or one that does not parse
        return err.strerror if not isinstance(err, ssl.SSLError) else "it holds no PEM certificate that parses"
    except (ValueError, UnicodeError):
        return "it holds no PEM certificate that parses"
    if not context.cert_store_stats().get("x509"):
        return "it holds no certificate (a CRL alone verifies nothing)"
    return None


def _headers(token_file: str | None) -> dict[str, str]:
    """The request's headers; TokenError when the token file (checked at start-up) no longer holds a token
    that can be sent: a rotation caught mid-write, say."""
    headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "rwo-failover"}
    if token_file:
        headers["Authorization"] = f"Bearer {read_bearer_token(token_file)}"
    return headers


def _opener(ca_file: str | None, per_read: float, remaining: Callable[[], float]) -> urllib.request.OpenerDirector:
    """HTTPS whose answers end with the pass (kube/deadline_http.py), and no redirects."""
    return urllib.request.build_opener(DeadlineHTTPS(_context(ca_file), per_read, remaining, past=PAST_DEADLINE),
                                       _NoRedirects())


def _attempt(url: str, payload: bytes, asked: Json, *, settings: Settings,
             remaining: Callable[[], float]) -> tuple[bool, str]:
    request = urllib.request.Request(url, data=payload, headers=_headers(settings.fence_webhook_token_file),
                                     method="POST")
    timeout = max(0.05, min(settings.request_timeout_seconds, remaining()))
    try:
        with _opener(settings.fence_webhook_ca_file, timeout, remaining).open(request, timeout=timeout) as ans:
            body = ans.read(MAX_ANSWER_BYTES)
            status = ans.status
    except urllib.error.HTTPError as err:
        if err.code == 429 or err.code >= 500:
            raise _Retryable(f"HTTP {err.code}", unanswered=False) from None
        if 300 <= err.code <= 399:
            where = without_userinfo(str(err.headers.get("Location") or "nowhere"))[:200]
            return False, f"HTTP {err.code} from the fence webhook, a redirect to {where}: redirects are never followed"
        return False, f"HTTP {err.code} from the fence webhook"
    except ssl.SSLError as err:
        return False, f"TLS verification of the fence webhook failed: {err.reason or err}"
    except urllib.error.URLError as err:
        if isinstance(err.reason, ssl.SSLError):
            return False, f"TLS verification of the fence webhook failed: {err.reason.reason or err.reason}"
        raise _Retryable(f"cannot reach the fence webhook: {err.reason}",
                         unanswered=not isinstance(err.reason, ConnectionRefusedError)) from None
    except (TimeoutError, OSError) as err:
        raise _Retryable(f"fence webhook: {type(err).__name__}: {err}") from None
    except http.client.IncompleteRead:  # http.client says so of a chunked body it cannot read, too
        raise _Retryable("the fence webhook's answer was cut short, or its chunked body is broken") from None
    except (http.client.HTTPException, ValueError) as err:
        # A bad status line, a broken chunked body, a header too long or too many: an answer, but not HTTP.
        # Only its kind is named: its bytes are the fencer's, and an Event is no place for them.
        return False, f"the fence webhook's answer is not valid HTTP ({type(err).__name__})"
    return judge_answer(status, body, asked)


def fence(payload: Json, settings: Settings, remaining: Callable[[], float], *, sleep: Callable[[float], None],
          stopped: Callable[[], str | None]) -> tuple[bool, str]:
    """(True, "") when the webhook confirmed; (False, why) otherwise. Never raises for the answer.

    `stopped` (the Writer's guard: a stop signal, lost leadership, the pass deadline) is asked before every
    attempt, retries included, as Api.call asks it before every attempt of a write: once it names a reason,
    WriteStopped says how many attempts were sent and whether one got no answer, for the Writer to judge."""
    body = json.dumps(payload).encode()
    attempts, unanswered = 0, False
    url = settings.fence_webhook_url
    assert url is not None, "settings/checks.py refuses FENCING=webhook without FENCE_WEBHOOK_URL"

    def attempt() -> tuple[bool, str]:
        nonlocal attempts, unanswered
        reason = stopped()
        if reason:
            raise WriteStopped(reason, attempts, unanswered)
        attempts += 1
        try:
            return _attempt(url, body, payload, settings=settings, remaining=remaining)
        except _Retryable as err:
            unanswered = unanswered or err.unanswered
            raise

    most = stop_after_attempt(settings.api_max_attempts)

    def stop(state: RetryCallState) -> bool:  # the last attempt was made, or the next would start past the deadline
        return most(state) or remaining() - state.upcoming_sleep <= 0

    retrying = Retrying(stop=stop,
                        wait=wait_exponential_jitter(multiplier=0.2, max=5.0, jitter=0.2),
                        retry=retry_if_exception(lambda err: isinstance(err, _Retryable)), sleep=sleep, reraise=True)
    try:
        return retrying(attempt)
    except _Retryable as err:
        return False, f"{err} (after {retrying.statistics.get('attempt_number', 1)} attempt(s))"
    except TokenError as err:
        return False, f"FENCE_WEBHOOK_TOKEN_FILE {settings.fence_webhook_token_file} cannot be sent: {err}"
