"""Continuous mode's HTTP endpoints: /metrics, /healthz and /readyz, on METRICS_PORT.

/healthz fails once no pass (or, on a standby, no leader-election round) has ended within
3 x INTERVAL + PASS_TIMEOUT_SECONDS, answered or not, so a hung loop gets restarted by its liveness probe, and
when a watch thread is stuck (watch.WatchedCluster.stuck); never because the API server does not answer.
/readyz is ready after the first pass (or first election round) while no watch is behind
(WatchedCluster.behind) and, with leader election, a round has reached the API server within the lease. Both
answer from state the loop updates; they never call the API server, so a slow cluster cannot make the probes time
out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


class Liveness:
    def __init__(self, window_seconds: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.window, self.monotonic = window_seconds, monotonic
        self.started = monotonic()
        self.last_progress: float | None = None
        # Why the process should be restarted (stuck) or is not ready (behind): set by the watch-driven loop.
        self.stuck: Callable[[], str | None] = lambda: None
        self.behind: Callable[[], str | None] = lambda: None
        # Why the last pass wrote nothing (the pause switch): /readyz's body says so, and stays 200, since a paused
        # replica still observes, plans and serves its metrics.
        self.paused: Callable[[], str] = lambda: ""

    def progressed(self, at: float | None = None) -> None:
        """A pass finished (or, on a standby, an election round ended, `at` then), answered or not: liveness is
        the process making progress, never the API server answering, or an API outage would restart every
        replica (and the kubelet's back-off delay the first pass after it). Readiness says the rest."""
        stamp = self.monotonic() if at is None else at
        self.last_progress = max(stamp, self.last_progress or stamp)

    @property
    def ready(self) -> bool:
        return self.last_progress is not None

    @property
    def alive(self) -> bool:
        return self.monotonic() - (self.last_progress or self.started) <= self.window


class HealthServer:
    def __init__(self, port: int, registry: CollectorRegistry, liveness: Liveness) -> None:
        self.port, self.registry, self.liveness = port, registry, liveness
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> HealthServer:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # the probes would flood the log
                pass

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, generate_latest(outer.registry), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    live = outer.liveness
                    why = None if live.alive else "no pass finished in time"
                    why = why or live.stuck()
                    self._send(503 if why else 200, f"{why}\n".encode() if why else b"ok\n")
                elif path == "/readyz":
                    live = outer.liveness
                    why = None if live.ready else "no pass finished yet"
                    why = why or live.behind()
                    paused = live.paused()
                    body = f"{why}\n" if why else f"ok; paused: {paused}\n" if paused else "ok\n"
                    self._send(503 if why else 200, body.encode())
                else:
                    self._send(404, b"not found\n")

            def _send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="health", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
