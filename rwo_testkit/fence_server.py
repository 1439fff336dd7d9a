"""A fence webhook for tests: HTTPS on loopback with a certificate from its own CA, scripted answers.

`answer` is (status, body) or a callable returning it; `delay` holds each answer back. Every request is
kept (headers and JSON body), so tests can check exactly what rwo-failover sent.
"""

from __future__ import annotations

import json
import ssl
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Optional

from .control_plane import make_pki


class FenceServer:
    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="fence-"))
        make_pki(self.folder)
        self.ca_file = str(self.folder / "ca.crt")
        self.answer: Any = (200, {"fenced": True})
        self.delay = 0.0
        self.requests: list[dict] = []
        self._server: Optional[ThreadingHTTPServer] = None

    def __enter__(self) -> "FenceServer":
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.requests.append({"headers": dict(self.headers), "body": json.loads(raw or b"null"),
                                       "path": self.path})
                time.sleep(outer.delay)
                status, body = outer.answer() if callable(outer.answer) else outer.answer
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (OSError, ssl.SSLError):  # the client gave up first (a timeout test)
                    self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.folder / "server.crt", self.folder / "server.key")
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server
        return f"https://127.0.0.1:{self._server.server_address[1]}/fence"
