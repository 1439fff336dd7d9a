"""A fence webhook for tests: HTTPS on loopback with a certificate from its own CA, scripted answers.

`answer` is (status, body) or (status, body, headers), or a callable of the request's JSON body returning
one; `delay` holds each answer back. The default answer is the contract's yes: {"fenced": true} naming the
node and uid the request named (docs/fencing.md). Every request is kept (method, path, headers, JSON body),
so tests can check exactly what rwo-failover sent.

`Recorder` is a plain-HTTP server that keeps every request and says yes to anything: where a redirect
points, to prove that no token and no belief ever reach it.

`RawFenceServer` is a FenceServer that answers bytes verbatim, HTTP or not (a bad status line, a broken
chunked body, a header too long), optionally one byte at a time: what a broken or hostile fencer, or a proxy
in front of one, may send.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socketserver import BaseRequestHandler, StreamRequestHandler
from typing import Any

from .control_plane import make_pki


def fenced_yes(body: Any) -> tuple[int, dict]:
    """The contract's yes: fenced, naming the node and uid that were asked about."""
    asked = body if isinstance(body, dict) else {}
    return 200, {"fenced": True, "node": asked.get("node"), "uid": asked.get("uid")}


def _handler(outer: _Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _serve(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                body = raw.decode("utf-8", "replace")
            outer.requests.append({"method": self.command, "headers": dict(self.headers), "body": body,
                                   "path": self.path})
            time.sleep(outer.delay)
            answer = outer.answer(body) if callable(outer.answer) else outer.answer
            status, payload, headers = (tuple(answer) + ({},))[:3]
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (OSError, ssl.SSLError):  # the client gave up first (a timeout test)
                self.close_connection = True

        do_POST = do_GET = do_PUT = _serve
    return Handler


class _Server:
    scheme = "http"

    def __init__(self) -> None:
        self.answer: Any = fenced_yes
        self.delay = 0.0
        self.requests: list[dict] = []
        self._server: ThreadingHTTPServer | None = None

    def _wrap(self, server: ThreadingHTTPServer) -> None:
        pass

    def _handler(self) -> type[BaseRequestHandler]:
        return _handler(self)

    def __enter__(self) -> _Server:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._wrap(self._server)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server
        return f"{self.scheme}://127.0.0.1:{self._server.server_address[1]}/fence"


class FenceServer(_Server):
    scheme = "https"

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="fence-"))
        make_pki(self.folder)
        self.ca_file = str(self.folder / "ca.crt")

    def _wrap(self, server: ThreadingHTTPServer) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.folder / "server.crt", self.folder / "server.key")
        server.socket = context.wrap_socket(server.socket, server_side=True)

    def __enter__(self) -> FenceServer:
        super().__enter__()
        return self


class Recorder(_Server):
    """Plain HTTP; says {"fenced": true} to anything, so a client that believed it would show."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = (200, {"fenced": True})

    def __enter__(self) -> Recorder:
        super().__enter__()
        return self


# What a RawFenceServer sends: bytes, or a function of the request's JSON body returning them.
Reply = bytes | Callable[[Any], bytes]


def http_answer(status: int, body: bytes, *headers: bytes) -> bytes:
    """A well-formed HTTP/1.1 answer, as bytes, for tests that mix good answers with broken ones."""
    head = b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n" % (status, len(body))
    return head + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body


def _raw_handler(outer: RawFenceServer) -> type[BaseRequestHandler]:
    class Raw(StreamRequestHandler):
        def handle(self) -> None:
            with contextlib.suppress(OSError, ssl.SSLError, ValueError):  # the client gave up, or sent something odd
                self._answer()

        def _answer(self) -> None:
            headers: dict[str, str] = {}
            while True:
                line = self.rfile.readline(65537)
                if line in (b"", b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip()] = value.strip()
            raw = self.rfile.read(int(headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                body = raw.decode("utf-8", "replace")
            outer.requests.append({"method": "POST", "headers": headers, "body": body})
            reply = outer.reply(body) if callable(outer.reply) else outer.reply
            step = 1 if outer.trickle else max(1, len(reply))
            for start in range(0, len(reply), step):
                if outer.closed:
                    return
                self.wfile.write(reply[start:start + step])
                time.sleep(outer.trickle)
    return Raw


class RawFenceServer(FenceServer):
    """HTTPS like FenceServer, but each request gets `reply` verbatim, `trickle` seconds per byte when set."""

    def __init__(self, reply: Reply, trickle: float = 0.0) -> None:
        super().__init__()
        self.reply, self.trickle, self.closed = reply, trickle, False

    def _handler(self) -> type[BaseRequestHandler]:
        return _raw_handler(self)

    def __enter__(self) -> RawFenceServer:
        super().__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closed = True
        super().__exit__(*exc)
