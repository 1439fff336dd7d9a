"""A TCP server on loopback that answers every connection with the same bytes, HTTP or not.

For peers that answer with something that is not HTTP (a proxy's banner, a TLS port spoken to in plain
text, a half-written reply): the client must turn that into one clean error. Every request's raw bytes
are kept, so a test can also check what was sent.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class RawReply:
    def __init__(self, reply: bytes, trickle: float = 0.0) -> None:
        self.reply = reply
        self.trickle = trickle  # > 0: the reply goes out 4 bytes at a time, this many seconds apart
        self.requests: list[bytes] = []
        self._sock: socket.socket | None = None

    def __enter__(self) -> RawReply:
        self._sock = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._sock:
            self._sock.close()

    @property
    def url(self) -> str:
        assert self._sock
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def _serve(self) -> None:
        assert self._sock
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            with conn:
                conn.settimeout(5)
                self.requests.append(self._read_head(conn))
                with contextlib.suppress(OSError):
                    self._send(conn)

    def _send(self, conn: socket.socket) -> None:
        if not self.trickle:
            conn.sendall(self.reply)
            return
        for start in range(0, len(self.reply), 4):
            conn.sendall(self.reply[start:start + 4])
            threading.Event().wait(self.trickle)

    @staticmethod
    def _read_head(conn: socket.socket) -> bytes:
        """The request line and headers (the body, if any, is left unread: the reply does not depend on it)."""
        data = b""
        while b"\r\n\r\n" not in data:
            try:
                chunk = conn.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
        return data
