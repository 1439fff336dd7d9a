"""One-shot mode (a CronJob's pass, or `--once` by hand): a pass, and a wait for a verdict that is due soon.

A CronJob passes once a minute, so a node proven down just after a pass waited up to a minute for the next
one. When a pass finds a node "not yet" down and the moment it will be (on the API server's clock, from the
plan) falls within ONCE_WAIT_SECONDS and leaves the next pass a third of PASS_TIMEOUT_SECONDS, this run
sleeps until that moment and passes again, reading everything afresh: the second pass judges live, exactly as
the first did, so the wait decides only *when* a pass runs, never what it does. The whole run stays inside
one PASS_TIMEOUT_SECONDS, so the CronJob's activeDeadlineSeconds still holds. A new process has not seen any node
NotReady itself (observe/sightings.py), so a node already NotReady is due MIN_NOT_READY_SECONDS after its first
pass: the run waits for that too. A dry run waits as a real one does, so its plan is the one a real run would act
on. A stop signal ends the wait at once.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from datetime import datetime

from ..act.outcome import Outcome
from ..act.writer import Guard
from ..kube import Api, ServerClockUnknown
from ..observe.sightings import Sightings
from ..planner import NodeState, Plan
from ..settings import Settings
from ..settings.one_shot import fits, off_wait, pass_timeout_needed
from .exitcodes import EXIT_CRASH, EXIT_FAILED, EXIT_FORBIDDEN, EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE
from .metrics import Metrics
from .quiet_wait import wait_for_taint
from .runner import run_pass

log = logging.getLogger(__name__)
MAX_PASSES = 3  # a first pass and two waits at most: a run never turns into a loop
MIN_QUIET_SECONDS = 2.0  # a shorter watch of quiet nodes is not worth listing the Leases for
QUIET_SLACK_SECONDS = 2.0  # the second pass itself, and the truncated second of the proof's stamp
WAKE_MARGIN_SECONDS = 0.2  # past the moment, so the verdict has surely changed when the pass judges it
STOP_CHECK_SECONDS = 0.2  # how soon a stop signal ends the wait


def run_once(new_api: Callable[[], Api], settings: Settings, metrics: Metrics, *, guard: Guard,
             show: Callable[[Plan], None] | None = None, sightings: Sightings | None = None) -> int:
    """One pass, then at most MAX_PASSES - 1 more, each after waiting for a node due to be proven down; the run's
    exit code is the most severe of its passes' (run_code). Every pass shares the first one's deadline, and one
    memory of what the run has seen (a node first seen Ready=Unknown by the first pass is proven down by the
    second, MIN_NOT_READY_SECONDS later)."""
    passes: list[tuple[int, bool]] = []  # each pass's exit code, and whether it changed the cluster
    code = _passes(new_api, settings, metrics, guard=guard, show=show, sightings=sightings or Sightings(),
                   record=passes.append)
    codes = [passed for passed, _ in passes[:-1]] + [code]  # the last: what the run made of it (an unfit wait: 1)
    return run_code(codes, changed=any(wrote for _, wrote in passes))


def run_code(codes: list[int], *, changed: bool) -> int:
    """The run's exit code from its passes' (in order): the most urgent of them (docs/settings.md: 5, then 3, then
    1, then 4); a pass that could not read the cluster (4, "nothing was changed") after one that changed it is 1,
    changed and not finished, which the log says."""
    for urgent in (EXIT_FORBIDDEN, EXIT_CRASH, EXIT_REFUSED, EXIT_FAILED):
        if urgent in codes:
            return urgent
    if EXIT_UNAVAILABLE in codes and changed:
        log.error("this run changed the cluster, then a later pass could not read it: not finished",
                  extra={"exit_codes": codes})
        return EXIT_FAILED
    return codes[-1]


def _passes(new_api: Callable[[], Api], settings: Settings, metrics: Metrics, *, guard: Guard,
            show: Callable[[Plan], None] | None, sightings: Sightings,
            record: Callable[[tuple[int, bool]], None]) -> int:
    """The passes of one run; `record` is told each pass's exit code and whether it changed the cluster."""
    api = new_api()
    for number in range(1, MAX_PASSES + 1):
        plans: list[Plan] = []
        shown: list[float] = []  # when each plan was made, on this process's monotonic clock
        outcomes: list[Outcome] = []
        code = run_pass(api, settings, metrics=metrics, guard=guard, show=_keep(plans, shown, show),
                        sightings=sightings, done=outcomes.append)
        record((code, any(o.changed for o in outcomes)))
        if not _may_wait(code, plans) or number == MAX_PASSES or guard() is not None:
            return code
        due, unfit = _due(plans, outcomes, api, settings=settings, first=number == 1,
                          shown_at=shown[0] if shown else 0.0)
        if unfit:
            log.error("a node this run cannot watch long enough to judge: no run of this length ever will",
                      extra={"reason": unfit, "setting": "PASS_TIMEOUT_SECONDS"})
            if code != EXIT_OK:  # a pass's own code (a split-brain alarm, 3) says more
                return code
            metrics.run_failed()  # the alerts read the run's failure, not the passes' success
            return EXIT_FAILED
        if due is not None:
            node, wait = due
            log.info("waiting for a node to be proven down, then passing again", extra={
                "node": node, "wait_seconds": round(wait, 1), "setting": "ONCE_WAIT_SECONDS"})
            if not _sleep_unless_stopped(wait, guard):
                return code
        elif number > 1 or not _quiet_node_tainted(api, settings, plans[0], guard=guard):
            return code
        deadline = api.deadline
        api = new_api()
        api.deadline = deadline  # one PASS_TIMEOUT_SECONDS for the whole run
    return code


def _may_wait(code: int, plans: list[Plan]) -> bool:
    """Whether the run may wait for a node due soon and pass again: after a clean pass, or one refused only for
    a split-brain node (exit 3 with no brake): that node's alarm comes back every pass, and must not keep a node
    proven down moments later from being freed in the same run."""
    if not plans:
        return False
    return code == EXIT_OK or (code == EXIT_REFUSED and plans[0].refusal is None and bool(plans[0].split_brain))


def _keep(plans: list[Plan], shown: list[float],
          show: Callable[[Plan], None] | None) -> Callable[[Plan], None]:
    def seen(plan: Plan) -> None:
        plans.append(plan)
        shown.append(time.monotonic())
        if show:
            show(plan)
    return seen


def _due(plans: list[Plan], outcomes: list[Outcome], api: Api, *, settings: Settings,
         first: bool, shown_at: float) -> tuple[tuple[str, float] | None, str]:
    """The node due to be judged again soonest, and the seconds until then, when waiting for it is worth it: within
    ONCE_WAIT_SECONDS, or whatever it says for a node that only this process's own sighting holds back (without
    that wait no one-shot run could ever prove a node down, or power off a silent one): NOT_YET, or DOWN with its
    fencing still pending (FENCING=redfish: its BMC answered On; the wait then keeps time for the BMC's Off as
    well). The second item names such a node when the wait cannot fit a run that has watched it from its
    first pass (`first`): no run of this length ever could; one first seen later is the next run's. A dry run waits
    too: its plan is then the real run's. A paused pass waits for nothing: it would free nothing."""
    if not plans or plans[0].paused:
        return None, ""
    pending = set(outcomes[0].fencing_pending) if outcomes else set()
    moments = [(v.changes_at, v.node, v.sighting_pending) for v in plans[0].verdicts
               if v.changes_at is not None and not v.unjudged
               and ((v.state is NodeState.NOT_YET and (settings.once_wait_seconds or v.sighting_pending))
                    or (v.state is NodeState.DOWN and v.sighting_pending and v.node in pending))]
    if not moments:
        return None, ""
    moment, node, own = min(moments)
    wait = (_own_seconds_until(moment, plans[0], shown_at) if own else _seconds_until(moment, api)) \
        + WAKE_MARGIN_SECONDS
    if wait <= 0 or (wait > settings.once_wait_seconds and not own):
        return None, ""
    used = settings.pass_timeout_seconds - api.remaining()
    if own:  # the wait for its own sighting: the arithmetic start-up checked the settings with (settings/one_shot.py)
        if fits(settings, used=used, wait=wait):
            return (node, wait), ""
        if not first:
            return None, ""
        kept = f" and {off_wait(settings):g}s for the BMC's Off" if off_wait(settings) else ""
        return None, (f"node {node} is judged only once this process has watched it {wait:.0f}s more, and this run "
                      f"({used:.0f}s in) must keep a third of PASS_TIMEOUT_SECONDS={settings.pass_timeout_seconds:g} "
                      f"for acting{kept}: raise PASS_TIMEOUT_SECONDS to at least "
                      f"{math.ceil(pass_timeout_needed(settings, used=used, wait=wait))}, or run continuous mode")
    if api.remaining() - wait < settings.pass_timeout_seconds / 3:
        return None, ""
    return (node, wait), ""


def _quiet_node_tainted(api: Api, settings: Settings, plan: Plan, *, guard: Guard) -> bool:
    """Whether a node whose kubelet went quiet got a shutdown taint while the run watched it (run/quiet_wait.py),
    within ONCE_WAIT_SECONDS and leaving the run time for a second pass, a wait of MIN_NOT_READY_SECONDS for the
    proof, and a third pass. A dry run, ONCE_WAIT_SECONDS=0 or too little time left: no Lease is even read."""
    if settings.dry_run or not settings.once_wait_seconds:
        return False
    left = api.remaining() - settings.pass_timeout_seconds / 3 - settings.min_not_ready_seconds - QUIET_SLACK_SECONDS
    budget = min(float(settings.once_wait_seconds), left)
    if budget < MIN_QUIET_SECONDS:
        return False
    node = wait_for_taint(api, settings, plan, budget=budget, guard=guard)
    if node is not None:
        log.info("a quiet node carries a shutdown taint now: passing again", extra={"node": node})
    return node is not None


def _own_seconds_until(moment: datetime, plan: Plan, shown_at: float) -> float:
    """Until a moment of this process's own sighting, which is timed on its monotonic clock: from the server time
    the plan was judged at, less the time since, never from a later reading of the server's clock, whose bound
    (Date headers are whole seconds) may have tightened by up to a second since the plan: the pass woke early."""
    if plan.judged_at is None:
        return -1.0
    return (moment - plan.judged_at).total_seconds() - (time.monotonic() - shown_at)


def _seconds_until(moment: datetime, api: Api) -> float:
    try:
        return (moment - api.server_clock.now()).total_seconds()
    except ServerClockUnknown:  # no Date header: nothing was judged, nothing is waited for
        return -1.0


def _sleep_unless_stopped(seconds: float, guard: Guard) -> bool:
    """Sleep in short slices, asking the guard between them (a signal handler cannot set an event: it takes no
    lock); False when a stop was requested meanwhile. Each slice is a timed wait on an event nobody sets, a
    relative timeout: time.sleep's absolute monotonic deadline fails with EINVAL under libfaketime (the suite runs
    real passes under Debian's faketime, tests/helpers.py)."""
    end, idle = time.monotonic() + seconds, threading.Event()
    while (left := end - time.monotonic()) > 0:
        if guard() is not None:
            return False
        idle.wait(min(STOP_CHECK_SECONDS, left))
    return guard() is None
