"""HTTP answers with a total deadline, for the calls made with urllib (the fence webhook, the Pushgateway push).

http.client's timeout bounds each socket read, so an answer trickled a byte at a time, each within the
timeout, would outlive any deadline (no HTTP library here bounds an answer's total time: urllib3, requests and
httpx time each read too). These handlers read every answer, status line and headers included, through a
reader that gives each socket read no more than what is left, and gives up once nothing is."""

from __future__ import annotations

import functools
import http.client
import io
import socket
import ssl
import urllib.request
from typing import Any, Callable, Optional

PAST_DEADLINE = "no complete answer before the deadline"


class _DeadlineReader(io.RawIOBase):
    def __init__(self, sock: socket.socket, plain: io.BufferedReader, per_read: float,
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


class _DeadlineResponse(http.client.HTTPResponse):
    def __init__(self, sock: socket.socket, *args: Any, per_read: float, remaining: Callable[[], float],
                 past: str, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        self.fp = io.BufferedReader(_DeadlineReader(sock, self.fp, per_read, remaining, past))


class _Deadline:
    """What each handler needs to build its connection class: one per open, answers read through the reader."""

    def __init__(self, per_read: float, remaining: Callable[[], float], past: str) -> None:
        self.response = functools.partial(_DeadlineResponse, per_read=per_read, remaining=remaining, past=past)


class DeadlineHTTPS(urllib.request.HTTPSHandler):
    def __init__(self, context: ssl.SSLContext, per_read: float, remaining: Callable[[], float],
                 past: str = PAST_DEADLINE) -> None:
        super().__init__(context=context)
        self.deadline = _Deadline(per_read, remaining, past)

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        class Connection(http.client.HTTPSConnection):
            response_class = self.deadline.response
        return self.do_open(Connection, req, context=self._context)


class DeadlineHTTP(urllib.request.HTTPHandler):
    def __init__(self, per_read: float, remaining: Callable[[], float], past: str = PAST_DEADLINE) -> None:
        super().__init__()
        self.deadline = _Deadline(per_read, remaining, past)

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        class Connection(http.client.HTTPConnection):
            response_class = self.deadline.response
        return self.do_open(Connection, req)


def deadline_handlers(per_read: float, remaining: Callable[[], float], past: str = PAST_DEADLINE,
                      context: Optional[ssl.SSLContext] = None) -> list[urllib.request.BaseHandler]:
    """Handlers for http:// and https:// (verified with `context`, or the system's CAs) whose answers end when
    `remaining()` reaches 0."""
    return [DeadlineHTTP(per_read, remaining, past),
            DeadlineHTTPS(context or ssl.create_default_context(), per_read, remaining, past)]
