"""The command line: settings, logging, credentials, then one pass or continuous mode."""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
import uuid
from typing import IO, Callable, Mapping, Optional, Sequence

from . import config, logs
from .client import Api, load_api_client
from .clock import SharedServerClock
from .exitcodes import EXIT_CONFIG, EXIT_CRASH
from .leader import LeaderElector
from .loop import Trigger, run_loop
from .metrics import Metrics
from .runner import run_pass
from .watch import WatchedCluster

log = logging.getLogger(logs.LOGGER)


def main(argv: Optional[Sequence[str]] = None, environ: Optional[Mapping[str, str]] = None,
         stdout: Optional[IO[str]] = None, stderr: Optional[IO[str]] = None,
         sleep: Callable[[float], None] = time.sleep) -> int:
    """The entry point; `sleep` is injectable so tests can check retry delays without waiting them out."""
    argv = sys.argv[1:] if argv is None else argv
    environ = os.environ if environ is None else environ
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    try:
        args, settings = config.load(argv, environ)
    except config.ConfigError as err:
        print(f"rwo-failover: configuration error: {err}", file=stderr)
        return EXIT_CONFIG
    logs.setup(settings.log_format, settings.log_level, stdout)
    try:
        api_client = load_api_client(settings)
    except config.ConfigError as err:
        print(f"rwo-failover: configuration error: {err}", file=stderr)
        return EXIT_CONFIG
    metrics = Metrics()
    continuous = bool(settings.interval and not args.once)
    # Continuous mode keeps one view of the server's clock across passes and watches: a pass that reads only
    # its watch cache makes no request of its own to read the clock from.
    server_clock = SharedServerClock() if continuous else None

    def new_api() -> Api:
        return Api(api_client, settings, sleep=sleep, on_attempt=metrics.api_request, server_clock=server_clock)
    try:
        if continuous:
            elector = LeaderElector(new_api, settings.leader_election_namespace, settings.leader_election_lease_name,
                                    f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}",
                                    settings.leader_election_lease_seconds) if settings.leader_election else None
            if not settings.watch:
                return run_loop(lambda: _listing_pass(new_api(), settings, metrics), settings, elector=elector,
                                metrics=metrics)
            trigger = Trigger()
            cluster = WatchedCluster(new_api, settings, trigger.fire, metrics)
            return run_loop(lambda: _watched_pass(new_api(), settings, metrics, cluster), settings, elector=elector,
                            metrics=metrics, watched=(cluster, trigger))
        code = run_pass(new_api(), settings, metrics=metrics)
    except Exception:  # noqa: BLE001 - a bug must still end with a code of its own and its traceback
        log.exception("unexpected error; this is a bug in rwo-failover")
        metrics.record_pass(None, None, EXIT_CRASH, 0.0)
        code = EXIT_CRASH
    if settings.pushgateway_url:
        metrics.push(settings.pushgateway_url, settings.pushgateway_instance)
    return code


def _listing_pass(api: Api, settings: config.Settings, metrics: Metrics) -> None:
    """One pass that lists what it needs (WATCH=false): the loop passes every INTERVAL."""
    run_pass(api, settings, metrics=metrics)


def _watched_pass(api: Api, settings: config.Settings, metrics: Metrics, cluster: WatchedCluster) -> Optional[float]:
    """One pass from the watch cache; the seconds until time alone changes a verdict (None: only a change)."""
    wake = []
    run_pass(api, settings, metrics=metrics, cache=cluster.view, on_plan=lambda plan: wake.append(plan.wake_at))
    if not wake or wake[0] is None:
        return None
    return (wake[0] - api.server_clock.now()).total_seconds()
