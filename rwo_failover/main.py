"""One pass, start to finish: settings, observe, decide, act, report, exit code."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from datetime import datetime, timezone
from typing import Callable, IO, Mapping, Optional, Sequence

from . import config, decide, logs
from .act import Actor, Outcome
from .client import Api, ApiError, Forbidden, load_api_client
from .observe import observe

EXIT_OK = 0           # done, or nothing to do
EXIT_FAILED = 1       # some action failed; the next pass retries it
EXIT_CONFIG = 2       # bad setting or kubeconfig; nothing was read
EXIT_REFUSED = 3      # the brake or the split-brain guard refused; a human should look
EXIT_UNAVAILABLE = 4  # the cluster could not be read; nothing was changed
EXIT_FORBIDDEN = 5    # RBAC denied a call; the message names the verb

log = logging.getLogger(logs.LOGGER)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


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
    if args.demo:
        from .demo import run_demo
        return run_demo(settings, stdout)
    try:
        api_client = load_api_client(settings)
    except config.ConfigError as err:
        print(f"rwo-failover: configuration error: {err}", file=stderr)
        return EXIT_CONFIG
    if settings.interval and not args.once:
        return run_loop(lambda: Api(api_client, settings, sleep=sleep), settings)
    return run_pass(Api(api_client, settings, sleep=sleep), settings)


def run_loop(new_api: Callable[[], Api], settings: config.Settings) -> int:
    """Continuous mode: a pass every INTERVAL seconds until SIGTERM or SIGINT, then exit 0.

    A signal never interrupts a pass: it is finished (within PASS_TIMEOUT_SECONDS), so no
    pod is left deleted with its attachment still in place. Each pass has its own deadline.
    """
    stop = threading.Event()

    def request_stop(signum: int, _frame: object) -> None:
        log.info("stop requested; finishing the pass in flight", extra={"signal": signal.Signals(signum).name})
        stop.set()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, request_stop)
    log.info("continuous mode", extra={"interval_seconds": settings.interval})
    while not stop.is_set():
        run_pass(new_api(), settings)
        stop.wait(settings.interval)
    log.info("stopped cleanly")
    return EXIT_OK


def run_pass(api: Api, settings: config.Settings, now: Callable[[], datetime] = utcnow) -> int:
    """Observe, decide, act; log one summary line; return the exit code."""
    started = time.monotonic()
    try:
        snapshot = observe(api, settings, now())
    except ApiError as err:
        code = EXIT_FORBIDDEN if isinstance(err, Forbidden) else EXIT_UNAVAILABLE
        log.error("cannot read the cluster; nothing was changed", extra={"error": str(err)})
        _summary(settings, None, None, code, started, api)
        return code
    plan = decide.plan(snapshot, settings)
    _log_plan(plan)
    actor = Actor(api, settings, now)
    actor.warn_split_brain(plan.split_brain)
    try:
        outcome = actor.execute(plan)
    except decide.UnsafePlan as err:
        log.error("refusing to act on anything", extra={"reason": str(err)})
        actor.record_refusal(plan)
        outcome = actor.outcome
    code = exit_code(plan, outcome)
    _summary(settings, plan, outcome, code, started, api)
    return code


def exit_code(plan: decide.Plan, outcome: Outcome) -> int:
    if outcome.forbidden:
        return EXIT_FORBIDDEN
    if plan.refusal or outcome.split_brain:
        return EXIT_REFUSED
    return EXIT_FAILED if outcome.failures else EXIT_OK


def _log_plan(plan: decide.Plan) -> None:
    for verdict in plan.verdicts:
        log.info("node verdict", extra={"node": verdict.node, "state": verdict.state.value,
                                        "taint": verdict.taint, "reason": verdict.reason})
    for skip in plan.skips:
        log.info("skipped", extra={"kind": skip.kind, "object": skip.name, "reason": skip.reason})


def _summary(settings: config.Settings, plan: Optional[decide.Plan], outcome: Optional[Outcome], code: int,
             started: float, api: Api) -> None:
    fields: dict[str, object] = {"dry_run": settings.dry_run, "exit_code": code,
                                 "duration_seconds": round(time.monotonic() - started, 3),
                                 "api_attempts": api.attempts}
    if plan is not None:
        states = [v.state for v in plan.verdicts]
        fields.update(nodes=plan.total_nodes, nodes_not_ready=plan.not_ready, tainted=len(states),
                      down=states.count(decide.NodeState.DOWN), not_yet=states.count(decide.NodeState.NOT_YET),
                      split_brain=states.count(decide.NodeState.ALIVE),
                      recovering=states.count(decide.NodeState.RECOVERING), pods_planned=plan.pod_count,
                      attachments_planned=plan.attachment_count, skips=len(plan.skips), refusal=plan.refusal or "")
    if outcome is not None:
        fields.update(pods_deleted=len(outcome.pods_deleted), pods_already_gone=len(outcome.pods_gone),
                      pods_replaced=len(outcome.pods_replaced),
                      attachments_deleted=len(outcome.attachments_deleted),
                      attachments_already_gone=len(outcome.attachments_gone),
                      attachments_held=len(outcome.attachments_held),
                      nodes_not_down_on_recheck=len(outcome.nodes_not_down_on_recheck),
                      taints_added=len(outcome.taints_added), taints_removed=len(outcome.taints_removed),
                      events=outcome.events, failures=len(outcome.failures) + len(outcome.forbidden))
    log.log(logging.INFO if code == EXIT_OK else logging.ERROR, "pass finished", extra=fields)
