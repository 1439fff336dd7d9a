"""The command line: settings, logging, credentials, then one pass or continuous mode."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import IO

from .. import __version__
from .. import settings as config
from ..act.fence_webhook import ca_file_problem
from ..act.writer import Guard
from ..kube import Api, WatchedCluster, load_api_client
from ..kube.clock import SharedServerClock
from ..kube.leader import LeaderElector
from ..observe.sightings import Sightings
from ..planner import NodeState, Plan
from . import logs, plan_table, status
from .exitcodes import EXIT_CONFIG, EXIT_CRASH
from .loop import StopFlag, Trigger, run_loop
from .metrics import Metrics
from .once import run_once
from .preflight import check_install
from .runner import run_pass

log = logging.getLogger(__name__)


HANDOFF_OFF = "out-of-service handoff off: storage that fences a node only while it carries the taint is not fenced"
# ceph-csi 3.15+ (Rook's rbd and cephfs drivers) blocklists a node's clients in ControllerUnpublishVolume only when
# the node carries the out-of-service taint at that moment: without it, a released volume is not fenced.
FENCES_ON_THE_TAINT = "ceph-csi 3.15+ rbd (*rbd.csi.ceph.com) and cephfs (*cephfs.csi.ceph.com): no blocklisting of " \
                      "the node's clients when its VolumeAttachments are released"


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None, *,
         stdout: IO[str] | None = None, stderr: IO[str] | None = None,
         sleep: Callable[[float], None] = time.sleep, sightings: Sightings | None = None) -> int:
    """The entry point; `sleep` is injectable so tests can check retry delays without waiting them out, and
    `sightings` (the process's memory of when it first saw each node Ready=Unknown; a new one by default) so a
    test's pass can stand for one of a process that has watched for long."""
    sightings = sightings or Sightings()
    argv = sys.argv[1:] if argv is None else argv
    environ = os.environ if environ is None else environ
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    if list(argv[:1]) == ["status"]:  # read-only: what an install holds, and why (status.py)
        return status.main(argv[1:], environ, stdout=stdout, stderr=stderr)
    loaded = _settings(argv, environ, stderr)
    if isinstance(loaded, int):
        return loaded
    args, settings = loaded
    logs.setup(settings.log_format, settings.log_level, stdout)
    continuous = bool(settings.interval and not args.once)
    _say_how_it_runs(settings, continuous)
    try:
        api_client = load_api_client(settings)
    except config.ConfigError as err:
        print(f"rwo-failover: configuration error: {err}", file=stderr)
        return EXIT_CONFIG
    metrics = Metrics()
    # Continuous mode keeps one view of the server's clock across passes and watches: a pass that reads only
    # its watch cache makes no request of its own to read the clock from.
    server_clock = SharedServerClock() if continuous else None

    def new_api() -> Api:
        return Api(api_client, settings, sleep=sleep, on_attempt=metrics.api_request, server_clock=server_clock)
    show = _table_printer(settings, continuous, stdout, stderr=stderr)
    if continuous:
        return _continuous(new_api, settings, metrics, show=show, sightings=sightings)
    return _one_run(new_api, settings, metrics, show=show, sightings=sightings)


def _settings(argv: Sequence[str], environ: Mapping[str, str],
              stderr: IO[str]) -> tuple[argparse.Namespace, config.Settings] | int:
    """The arguments and the settings, or EXIT_CONFIG once stderr says what is wrong with them."""
    try:
        args, settings = config.load(argv, environ)
    except config.ConfigError as err:
        print(f"rwo-failover: configuration error: {err}", file=stderr)
        return EXIT_CONFIG
    ca_problem = settings.fence_webhook_ca_file and ca_file_problem(settings.fence_webhook_ca_file)
    if ca_problem:
        print(f"rwo-failover: configuration error: FENCE_WEBHOOK_CA_FILE={settings.fence_webhook_ca_file!r} is "
              f"invalid ({ca_problem}); allowed: a readable file of PEM certificates", file=stderr)
        return EXIT_CONFIG
    return args, settings


def _say_how_it_runs(settings: config.Settings, continuous: bool) -> None:
    log.info("rwo-failover starting", extra={"version": __version__, "mode": "continuous" if continuous else "one pass",
                                             "dry_run": settings.dry_run})
    for rule, disables in config.switched_off(settings):  # only acknowledged ones get this far
        log.warning("safety rule switched off by ALLOW_UNSAFE", extra={"rule": rule, "disables": disables})
    if settings.out_of_service_taint == "never":
        log.warning(HANDOFF_OFF, extra={"setting": "OUT_OF_SERVICE_TAINT=never", "skips": FENCES_ON_THE_TAINT})


def _continuous(new_api: Callable[[], Api], settings: config.Settings, metrics: Metrics, *,
                show: Callable[[Plan], None] | None, sightings: Sightings) -> int:
    """Passes until a stop signal: every INTERVAL (WATCH=false), or when the watch cache sees a change."""
    elector = LeaderElector(new_api, settings.leader_election_namespace, settings.leader_election_lease_name,
                            identity=f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}",
                            lease_seconds=settings.leader_election_lease_seconds,
                            write_margin=settings.request_timeout_seconds + 1) \
        if settings.leader_election else None
    guard = elector.write_guard if elector else None
    if not settings.watch:
        return _crash_is_exit_70(metrics, lambda: _checked(new_api(), settings, lambda: run_loop(
            lambda: _listing_pass(new_api(), settings, metrics, guard=guard, show=show, sightings=sightings),
            settings, elector=elector, metrics=metrics)))
    trigger = Trigger()
    cluster = WatchedCluster(new_api, settings, trigger.fire, metrics)
    return _crash_is_exit_70(metrics, lambda: _checked(new_api(), settings, lambda: run_loop(
        lambda: _watched_pass(new_api(), settings, metrics, guard=guard, show=show, cluster=cluster,
                              sightings=sightings),
        settings, elector=elector, metrics=metrics, watched=(cluster, trigger))))


def _one_run(new_api: Callable[[], Api], settings: config.Settings, metrics: Metrics, *,
             show: Callable[[Plan], None] | None, sightings: Sightings) -> int:
    """One run (once.py), stopped cleanly by SIGTERM or Ctrl-C; its metrics pushed when PUSHGATEWAY_URL is set."""
    api = new_api()  # the start-up check shares the pass's deadline: an unreachable server costs it once
    with _stop_on_signals() as stop:
        first = [api]  # the start-up check's Api: the first pass shares its deadline

        def next_api() -> Api:
            return first.pop() if first else new_api()
        code = _crash_is_exit_70(metrics, lambda: _checked(api, settings, lambda: run_once(
            next_api, settings, metrics, guard=stop, show=show, sightings=sightings)))
        if settings.pushgateway_url:  # after a crash too: the alerts must see it
            metrics.push(settings.pushgateway_url, settings.pushgateway_instance)
    return code


def _checked(api: Api, settings: config.Settings, run: Callable[[], int]) -> int:
    """Say once what the settings need and the cluster lacks (preflight.py), then run."""
    check_install(api, settings)
    return run()


def _listing_pass(api: Api, settings: config.Settings, metrics: Metrics, *, guard: Guard | None,
                  show: Callable[[Plan], None] | None, sightings: Sightings) -> None:
    """One pass that lists what it needs (WATCH=false): the loop passes every INTERVAL."""
    run_pass(api, settings, metrics=metrics, guard=guard, show=show, sightings=sightings)


def _watched_pass(api: Api, settings: config.Settings, metrics: Metrics, *, guard: Guard | None,
                  show: Callable[[Plan], None] | None, cluster: WatchedCluster,
                  sightings: Sightings) -> float | None:
    """One pass from the watch cache; the seconds until time alone changes a verdict (None: only a change),
    on the server's clock: the plan's wake_at less the server's time now. Then the pods on the nodes it found
    proven down are watched, so a change to one wakes a pass (kube/pod_watch.py)."""
    wake: list[datetime | None] = []
    down: list[str] = []

    def seen(plan: Plan) -> None:
        wake.append(plan.wake_at)
        down.extend(v.node for v in plan.verdicts if v.state is NodeState.DOWN)
        if show:
            show(plan)
    run_pass(api, settings, metrics=metrics, guard=guard, show=seen, cache=cluster.view,
             watched_pause=cluster.paused, nodes_now=cluster.nodes_now, sightings=sightings)
    if wake:  # a pass that could not read the cluster judged nothing: the watches stay as they are
        cluster.pods.follow(down, api)
    if not wake or wake[0] is None:
        return None
    return (wake[0] - api.server_clock.now()).total_seconds()


def _crash_is_exit_70(metrics: Metrics, run: Callable[[], int]) -> int:
    try:
        return run()
    except Exception:
        log.exception("unexpected error; this is a bug in rwo-failover")
        metrics.record_pass(None, None, EXIT_CRASH, seconds=0.0)
        return EXIT_CRASH


@contextmanager
def _stop_on_signals() -> Iterator[Guard]:
    """One pass, and SIGTERM (Kubernetes ending the Job) or Ctrl-C: from then on no new write starts (the
    writer asks this guard before each attempt), the write in flight finishes, and the pass ends with its
    summary line, its metrics push and a truthful exit code. Without it SIGTERM killed the process between a
    pod's delete and its attachment's, and Ctrl-C printed a traceback. The previous handlers come back
    afterwards, so a caller in the same process (a test runner) keeps its own Ctrl-C."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    flag = StopFlag()
    flag.install()
    try:
        yield _guard(flag)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _guard(flag: StopFlag) -> Guard:
    noticed: list[str] = []

    def guard() -> str | None:
        if flag.requested is None:
            return None
        name = signal.Signals(flag.requested).name
        if not noticed:  # logged here, in the pass's thread: the signal handler itself takes no lock
            noticed.append(name)
            log.warning("stop requested: no new write starts; the pass ends early", extra={"signal": name})
        return f"stop requested ({name})"
    return guard


def _table_printer(settings: config.Settings, continuous: bool, stdout: IO[str],
                   *, stderr: IO[str]) -> Callable[[Plan], None] | None:
    """The plan as a table for people: with OUTPUT=table, or on a terminal for one pass (OUTPUT=auto).

    On stdout only when stdout is a terminal; otherwise on stderr, so that stdout (piped into jq, collected
    from a Job) holds nothing but log lines, each whole."""
    on_terminal = stdout.isatty()
    if settings.output == "none" or (settings.output == "auto" and (continuous or not on_terminal)):
        return None
    stream = stdout if on_terminal else stderr

    def show(plan: Plan) -> None:
        for handler in logging.getLogger(logs.LOGGER).handlers:
            handler.flush()  # the table comes after the log lines that led to it
        stream.write(plan_table.render(plan, settings.dry_run or bool(plan.paused)))
        stream.flush()
    return show
