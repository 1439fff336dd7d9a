"""HTTP answers with a total deadline, for the calls made with urllib (the fence webhook, the Pushgateway push).

http.client's timeout bounds each socket read, so an answer trickled a byte at a time, each within the
timeout, would outlive any deadline (no HTTP library here bounds an answer's total time: urllib3, requests and
httpx time each read too). These handlers read every answer, status line and headers included, through a
reader that gives each socket read no more than what is left, and gives up once nothing is."""

from __future__ import annotations

import http.client
import io
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import urllib3

PAST_DEADLINE = "no complete answer before the deadline"


class _DeadlineReader(io.RawIOBase):
    def __init__(self, sock: socket.socket, plain: io.BufferedReader, per_read: float, *,
                 remaining: Callable[[], float], past: str) -> None:
        super().__init__()
        self.sock, self.plain, self.per_read, self.remaining, self.past = sock, plain, per_read, remaining, past

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.remaining()
        if left > 0:
            self.sock.settimeout(min(self.per_read, left))
            try:
                return self.sock.recv_into(buffer)
            except TimeoutError:
                if self.remaining() > 0:
                    raise
        raise TimeoutError(self.past)

    def close(self) -> None:
        self.plain.close()  # it holds the socket's reference that http.client counts on to close it
        super().close()


class _Deadline:
    """What each handler needs to build its connection class: one per open, answers read through the reader."""

    def __init__(self, per_read: float, remaining: Callable[[], float], past: str) -> None:
        class Response(http.client.HTTPResponse):
            def __init__(self, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
                super().__init__(sock, *args, **kwargs)
                self.fp = io.BufferedReader(_DeadlineReader(sock, self.fp, per_read, remaining=remaining, past=past))

        self.response: type[http.client.HTTPResponse] = Response


class DeadlineHTTPS(urllib.request.HTTPSHandler):
    def __init__(self, context: ssl.SSLContext, per_read: float, remaining: Callable[[], float], *,
                 past: str = PAST_DEADLINE) -> None:
        super().__init__(context=context)
        self.context = context
        self.deadline = _Deadline(per_read, remaining, past)

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        class Connection(http.client.HTTPSConnection):
            response_class = self.deadline.response
        return self.do_open(Connection, req, context=self.context)


class DeadlineHTTP(urllib.request.HTTPHandler):
    def __init__(self, per_read: float, remaining: Callable[[], float], past: str = PAST_DEADLINE) -> None:
        super().__init__()
        self.deadline = _Deadline(per_read, remaining, past)

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        class Connection(http.client.HTTPConnection):
            response_class = self.deadline.response
        return self.do_open(Connection, req)


def deadline_handlers(per_read: float, remaining: Callable[[], float], past: str = PAST_DEADLINE, *,
                      context: ssl.SSLContext | None = None) -> list[urllib.request.BaseHandler]:
    """Handlers for http:// and https:// (verified with `context`, or the system's CAs) whose answers end when
    `remaining()` reaches 0."""
    return [DeadlineHTTP(per_read, remaining, past),
            DeadlineHTTPS(context or ssl.create_default_context(), per_read, remaining, past=past)]


# --- the same bound for the API client's urllib3 pool (kube/transport.py) ------------------------------------
# urllib3 reads the status line and headers inside call_api, before any body read the transport could bound: a
# proxy trickling its headers kept a 3 s pass running 13.8 s. Its connections build their responses through
# these classes, read through _DeadlineReader while the calling thread has set an end (`answer_deadline`).
_CURRENT = threading.local()


class _PoolResponse(http.client.HTTPResponse):
    def __init__(self, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        bound: tuple[float, float] | None = getattr(_CURRENT, "bound", None)
        if bound is not None:
            ends, per_read = bound
            self.fp = io.BufferedReader(_DeadlineReader(sock, self.fp, per_read,
                                                        remaining=lambda: ends - time.monotonic(),
                                                        past="no complete answer before the pass deadline "
                                                             "(PASS_TIMEOUT_SECONDS)"))


class _Connection(urllib3.connection.HTTPConnection):
    response_class = _PoolResponse


class _TLSConnection(urllib3.connection.HTTPSConnection):
    response_class = _PoolResponse


class _Pool(urllib3.HTTPConnectionPool):
    ConnectionCls = _Connection


class _TLSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _TLSConnection


def bound_answers(pool_manager: Any) -> None:
    """Make the API client's pools read answers through the deadline reader (a SOCKS proxy's pools are left as
    they are). Idempotent; before the first request, since pools are made on first use."""
    classes = getattr(pool_manager, "pool_classes_by_scheme", None)
    if classes == {"http": urllib3.HTTPConnectionPool, "https": urllib3.HTTPSConnectionPool}:
        pool_manager.pool_classes_by_scheme = {"http": _Pool, "https": _TLSPool}


@contextmanager
def answer_deadline(ends: float | None, per_read: float) -> Iterator[None]:
    """Answers whose reading starts in this block, on this thread, end at `ends` (time.monotonic); None: as
    urllib3 reads them (a watch's stream, which its own staleness bounds)."""
    _CURRENT.bound = None if ends is None else (ends, per_read)
    try:
        yield
    finally:
        _CURRENT.bound = None
