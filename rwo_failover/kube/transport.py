"""One API call: raw JSON, bounded retries, one pass deadline.

Calls go through the official client's ApiClient (kubeconfig or in-cluster
auth, TLS, the urllib3 pool) with `param_serialize` and `call_api`, and parse
the JSON body themselves (lists and tenant objects through kube/decode.py, to
the few fields a pass reads; the rest with json.loads). That skips the generated API classes: their import
builds a pydantic validator for every method (~0.9 s), each call validates its
arguments (~1.4 ms), and default deserialization of a 5,000-node list takes
seconds and hundreds of MB (see bench/). Every call goes through `Api.call`,
the one place that retries: on 429 (honouring Retry-After), 5xx, connection
errors and truncated bodies, for at most API_MAX_ATTEMPTS attempts and never
past the pass deadline.

Watches (continuous mode, kube/reflector.py) use the client's own `kubernetes.watch.Watch` over the same transport:
it is handed a function that opens the stream through `Api.call` (so opening is retried and deadline-bound
like any read) and returns the raw urllib3 response, which Watch splits into lines and parses with
`json.loads`. Given no model type, Watch never builds model objects (see `watch_events`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any, Literal, TypeVar, overload

import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from ..model import Json
from ..settings import Settings
from .clock import ServerClock
from .deadline_http import answer_deadline, bound_answers
from .errors import (
    NO_ANSWER,
    AnswerTooLarge,
    ApiError,
    Forbidden,
    OddAnswer,
    Unavailable,
    WriteStopped,
    describe,
    is_transient,
    message_of,
)

log = logging.getLogger(__name__)
MAX_RETRY_AFTER_SECONDS = 30.0
BODY_READ_BYTES = 1 << 16
MIN_ATTEMPT_SECONDS = 0.05
PAST_DEADLINE = "no complete answer before the pass deadline (PASS_TIMEOUT_SECONDS)"
R = TypeVar("R")


def _retry_after(err: BaseException) -> float | None:
    headers = getattr(err, "headers", None) or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class Transport:
    """The calls a pass makes, each retried within bounds and charged to one deadline."""

    def __init__(self, api_client: k8s.ApiClient, settings: Settings, clock: Callable[[], float] = time.monotonic,
                 *, sleep: Callable[[float], None] = time.sleep,
                 on_attempt: Callable[[str, str, str], None] | None = None,
                 server_clock: ServerClock | None = None) -> None:
        self.api_client = api_client
        self.on_attempt = on_attempt  # (verb, what, status code or "error"): for the metrics
        self.settings = settings
        self.clock, self.sleep = clock, sleep
        # Fed by every response's Date header. Continuous mode shares one across passes, so a pass that reads
        # only its watch cache still judges ages on the server's clock (fed by the watch's own requests).
        self.server_clock = server_clock or ServerClock(monotonic=clock)
        self.listed_version = ""  # the resourceVersion of the last list completed: where a watch starts
        self.deadline = clock() + settings.pass_timeout_seconds
        self.attempts = 0  # every HTTP attempt, retries included, for the summary
        # Asked before every attempt of a write (retries included): a reason to send nothing more. The Writer
        # sets it; reads are never stopped, since a read changes nothing.
        self.write_guard: Callable[[], str | None] | None = None
        # Asked before every retry of a destructive write (the Actor sets it around one): the world may have
        # moved while the last attempt went unanswered, so the node is judged again, live, before each resend.
        self.retry_guard: Callable[[], str | None] | None = None
        # The current call: attempts sent, and whether one of them got no answer at all (so a write may have
        # landed although a later attempt says 404 or 409).
        self.call_attempts, self.call_unanswered = 0, False
        self._backoff = wait_exponential_jitter(multiplier=0.2, max=5.0, jitter=0.2)

    def remaining(self) -> float:
        return self.deadline - self.clock()

    def _wait(self, state: RetryCallState) -> float:
        err = state.outcome.exception() if state.outcome else None
        hinted = _retry_after(err) if err else None
        if hinted is not None:
            return min(hinted, MAX_RETRY_AFTER_SECONDS)
        return self._backoff(state)

    def _past_deadline(self, state: RetryCallState) -> bool:
        return self.clock() + state.upcoming_sleep >= self.deadline

    def _log_retry(self, verb: str, what: str) -> Callable[[RetryCallState], None]:
        def before_sleep(state: RetryCallState) -> None:
            err = state.outcome.exception() if state.outcome else None
            log.warning("retrying API call", extra={"verb": verb, "resource": what, "attempt": state.attempt_number,
                                                    "error": describe(err) if err else "",
                                                    "sleep_seconds": round(state.upcoming_sleep, 3)})
        return before_sleep

    @overload
    def call(self, verb: str, what: str, method: str, path: str, *,
             query: list[tuple[str, Any]] | None = None, body: Json | None = None, content_type: str = ...,
             stream: Literal[False] = False, attempts: int | None = None, decode: None = None,
             max_bytes: int | None = None) -> dict[str, Any] | None: ...

    @overload
    def call(self, verb: str, what: str, method: str, path: str, *,
             query: list[tuple[str, Any]] | None = None, body: Json | None = None, content_type: str = ...,
             stream: Literal[False] = False, attempts: int | None = None, decode: Callable[[bytes], R],
             max_bytes: int | None = None) -> R | None: ...

    @overload
    def call(self, verb: str, what: str, method: str, path: str, *,
             query: list[tuple[str, Any]] | None = None, body: Json | None = None, content_type: str = ...,
             stream: Literal[True], attempts: int | None = None, decode: None = None,
             max_bytes: int | None = None) -> urllib3.BaseHTTPResponse | None: ...

    def call(self, verb: str, what: str, method: str, path: str, *,  # noqa: PLR0917 - verb, what, method, path read as a request line; tests/test_rbac.py reads the path there
             query: list[tuple[str, Any]] | None = None, body: Json | None = None,
             content_type: str = "application/json", stream: bool = False, attempts: int | None = None,
             decode: Callable[[bytes], Any] | None = None, max_bytes: int | None = None) -> Any:
        """One API call, retried within bounds; its parsed JSON body, or None for 404 (but a create's 404 is an
        ApiError: nothing can be "already gone" before it exists).

        `verb` and `what` name the RBAC verb and resource: they go in every error message. With `stream`, the
        answer is the open urllib3 response (status checked, body unread), for a watch. `attempts` lowers
        API_MAX_ATTEMPTS for a call whose failure the pass finds out anyway (the start-up check). `decode` turns
        the body into the answer instead of json.loads (kube/decode.py: only the fields a pass reads), inside
        the attempt, so a body cut short is retried as before; an answer longer than `max_bytes` is
        AnswerTooLarge, unread.
        """
        self.call_attempts, self.call_unanswered = 0, False
        limit = stop_after_attempt(attempts or self.settings.api_max_attempts)
        retrying = Retrying(
            stop=lambda state: limit(state) or self._past_deadline(state),  # either bound ends the retries
            wait=self._wait, retry=retry_if_exception(is_transient), sleep=self.sleep,
            before_sleep=self._log_retry(verb, what), reraise=True)
        try:
            return retrying(self._attempt, verb, what, method, path=path, query=query or [], body=body,
                            content_type=content_type, stream=stream, decode=decode, max_bytes=max_bytes)
        except ApiException as err:
            if err.status == 404 and method == "POST":
                # Nothing was there to finish: the namespace or the API itself does not exist. A failure, with
                # the server's own words for which (namespaces "x" not found, or no such resource).
                raise ApiError(f"{verb} {what}: {message_of(err)} (HTTP 404: a namespace or an API that does not "
                               "exist)", 404) from None
            if err.status == 404:
                return None
            if err.status == 403:
                raise Forbidden(f"RBAC denies verb {verb!r} on {what}: {message_of(err)}", 403) from None
            if is_transient(err):
                raise Unavailable(f"{verb} {what}: {describe(err)} after {self._bound(retrying)}", err.status) from None
            raise ApiError(f"{verb} {what}: {message_of(err)}", err.status or 0) from None
        except NO_ANSWER as err:
            raise Unavailable(f"{verb} {what}: {describe(err)} after {self._bound(retrying)}",
                              answered=False) from None

    def _write_stopped(self) -> str | None:
        return self.write_guard() if self.write_guard else None

    def _retry_stopped(self) -> str | None:
        """The retry guard's reason not to resend; its own reads are calls too, so this call's state is kept."""
        if not self.call_attempts or self.retry_guard is None:
            return None
        state, guard = (self.call_attempts, self.call_unanswered), self.retry_guard
        self.retry_guard = None  # the guard's reads are GETs; never let it ask itself again
        try:
            return guard()
        finally:
            self.call_attempts, self.call_unanswered = state
            self.retry_guard = guard

    def _bound(self, retrying: Retrying) -> str:
        """Which bound ended the retries: the attempt count, or the pass deadline."""
        made = retrying.statistics.get("attempt_number", 1)
        if made < self.settings.api_max_attempts:
            return (f"{made} attempt(s); the next would pass the deadline "
                    f"(PASS_TIMEOUT_SECONDS={self.settings.pass_timeout_seconds:g})")
        return f"{made} attempt(s) (API_MAX_ATTEMPTS)"

    def _attempt(self, verb: str, what: str, method: str, *, path: str, query: list[tuple[str, Any]],
                 body: Json | None, content_type: str, stream: bool = False,
                 decode: Callable[[bytes], Any] | None = None, max_bytes: int | None = None) -> Any:
        if method != "GET":
            # Asked again after the retry guard: its live re-check reads take time, in which a stop signal,
            # a lost leadership or the deadline may come.
            reason = self._write_stopped() or self._retry_stopped() or self._write_stopped()
            if reason:
                raise WriteStopped(reason, self.call_attempts, self.call_unanswered)
        self.attempts += 1
        self.call_attempts += 1
        code = "error"
        try:
            result, code = self._send(method, path, query, body=body, content_type=content_type, stream=stream,
                                      decode=decode, max_bytes=max_bytes)
            return result
        except ApiException as err:
            code = str(err.status)
            raise
        except NO_ANSWER:
            self.call_unanswered = True
            raise
        finally:
            if self.on_attempt:
                self.on_attempt(verb, what, code)

    def _read_body(self, raw: Any, per_read: float, ends: float, *, max_bytes: int | None = None) -> bytes:
        """The whole body, or ReadTimeoutError once `ends` has passed. urllib3 times each socket read, so an
        answer trickled a few bytes at a time, each within the read timeout, would outlive any deadline: each
        read here is given no more than what is left, and the deadline is judged between them."""
        sock = getattr(getattr(raw, "connection", None), "sock", None)
        parts: list[bytes] = []
        size = 0
        while True:
            left = ends - self.clock()
            if left <= 0:
                parts.clear()  # as below: never kept alive by the exception
                raise urllib3.exceptions.ReadTimeoutError(None, "", PAST_DEADLINE)  # type: ignore[arg-type]  # no pool here: urllib3 types it ConnectionPool
            if sock is not None:
                sock.settimeout(max(0.05, min(per_read, left)))
            chunk = raw.read1(BODY_READ_BYTES)
            if not chunk:
                return b"".join(parts)
            parts.append(chunk)
            size += len(chunk)
            if max_bytes is not None and size > max_bytes:
                raw.close()  # the rest is never read: the connection is not reused
                # Dropped now: the exception's traceback keeps this frame, and tenacity's retry state keeps the
                # exception in a reference cycle, so `parts` (16 MiB) would outlive the list until a collection.
                parts.clear()
                raise AnswerTooLarge(f"the answer is longer than {max_bytes} bytes")

    def _send(self, method: str, path: str, query: list[tuple[str, Any]], *, body: Json | None, content_type: str,
              stream: bool = False, decode: Callable[[bytes], Any] | None = None,
              max_bytes: int | None = None) -> tuple[Any, str]:
        timeout = max(MIN_ATTEMPT_SECONDS, min(self.settings.request_timeout_seconds, self.remaining()))
        # The whole answer ends with the pass; an attempt started at its very end (a read is never refused: the
        # live re-check that may stop a write) still gets its short minimum, as each of its reads always had.
        ends = max(self.deadline, self.clock() + MIN_ATTEMPT_SECONDS)
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        request = self.api_client.param_serialize(method=method, resource_path=path, query_params=query,
                                                  header_params=headers, body=body, auth_settings=["BearerToken"])
        # A watch's reads wait for the next event or bookmark: WATCH_STALE_SECONDS, not a request's timeout.
        read = self.settings.watch_stale_seconds if stream else timeout
        bound_answers(self.api_client.rest_client.pool_manager)
        # The monotonic end of this answer, status line and headers included (the transport's clock may be a
        # test's; the reader's is time.monotonic).
        answer_ends = None if stream else time.monotonic() + (ends - self.clock())
        with answer_deadline(answer_ends, timeout):
            response = self.api_client.call_api(*request, _request_timeout=(timeout, read))
        self.server_clock.observe(response.getheader("Date"))  # type: ignore[no-untyped-call]  # the client's RESTResponse is unannotated
        if stream and 200 <= response.status <= 299:
            return response.response, str(response.status)
        try:
            # It can fail mid-way: inside the attempt.
            data = self._read_body(response.response, timeout, ends, max_bytes=max_bytes)
        finally:
            response.response.release_conn()
        if not 200 <= response.status <= 299:
            raise ApiException.from_response(http_resp=response, body=data.decode("utf-8", "replace"), data=None)
        if decode is not None and data:
            return decode(data), str(response.status)
        try:
            found = json.loads(data) if data else {}
        except RecursionError:  # nested deeper than Python's parser goes: no retry will change that
            raise ApiException(status=0, reason="the response is nested too deeply to parse") from None
        if not isinstance(found, dict):
            raise OddAnswer(f"HTTP {response.status}, but the answer is JSON {type(found).__name__}, not an object")
        return found, str(response.status)
