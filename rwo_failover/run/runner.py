"""One pass, start to finish: observe, decide, act, one summary line, and the exit code."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from datetime import datetime

from .. import planner
from ..act.actor import Actor
from ..act.control import PauseCheck
from ..act.outcome import Outcome
from ..act.writer import Guard
from ..kube import Api, ApiError, Forbidden
from ..kube.clock import ServerClockUnknown
from ..model import Cached, Node, Snapshot, Unreadable
from ..model.control import NOT_PAUSED, Pause
from ..observe import observe, observe_again
from ..observe.sightings import Sightings
from ..settings import Settings
from .exitcodes import EXIT_FAILED, EXIT_FORBIDDEN, EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE
from .metrics import Metrics

# The cache's nodes as of a consistent read made now, or None when it has not caught up (kube/cache.py).
NodesNow = Callable[[Api], tuple[Node | Unreadable, ...] | None]

log = logging.getLogger(__name__)


def run_pass(api: Api, settings: Settings, metrics: Metrics | None = None, *, guard: Guard | None = None,
             show: Callable[[planner.Plan], None] | None = None,
             cache: Callable[[Api], Cached] | None = None, watched_pause: Callable[[], Pause] | None = None,
             nodes_now: NodesNow | None = None,
             sightings: Sightings | None = None, done: Callable[[Outcome], None] | None = None) -> int:
    """Observe, decide, act; log one summary line; return the exit code.

    Every age is judged on the API server's clock (clock.ServerClock, fed by the Date header of each
    response); this process's own clock is never read for a judgment. `guard` names a reason once no write
    may start (a stop signal, leadership lost); see writer.Guard. The summary's `stopped_by` is its reason
    at the end. `show` gets the plan before anything is acted on (the table for people, plan_table.py).
    `cache` gives continuous mode's watched lists to observe (kube.cache), and `watched_pause` its watched pause
    switch, which the write guard asks before every write. A paused pass (planner/control.py) acts as a dry run.
    `nodes_now`: the cache's nodes as of a consistent read made now, when it has caught up (see decide).
    `sightings`: the process's memory of when it first saw each node Ready=Unknown (observe/sightings.py); one
    for the process, kept across its passes; a pass without one remembers nothing before itself. `done` gets what
    the pass did (one-shot mode's wait reads which fencing is still pending).
    """
    started = time.monotonic()
    now = api.server_clock.now
    sightings = sightings or Sightings()
    try:
        snapshot, plan = decide(api, settings, now, sightings=sightings, cache=cache, nodes_now=nodes_now)
    except (ApiError, ServerClockUnknown) as err:
        code = EXIT_FORBIDDEN if isinstance(err, Forbidden) else EXIT_UNAVAILABLE
        log.error("cannot read the cluster; nothing was changed", extra={"error": str(err)})
        _summary(settings, None, None, code=code, started=started, api=api, metrics=metrics, guard=guard)
        return code
    _log_plan(plan)
    if show:
        show(plan)
    pause = PauseCheck(api, settings, guard, watched=watched_pause)
    if plan.paused:
        log.warning("paused: this pass observes and plans, and writes nothing", extra={"pause": str(plan.paused)})
    acting = dataclasses.replace(settings, dry_run=True) if plan.paused else settings
    actor = Actor(api, acting, now, sightings=sightings, metrics=metrics, guard=pause,
                  node_uids={n.name: n.uid for n in snapshot.nodes},
                  live_pause=pause.live, memory=(settings.dry_run, guard))
    actor.warn_unreadable(snapshot.unreadable, plan)
    actor.warn_unjudged(plan)
    actor.warn_split_brain(plan.split_brain)
    actor.warn_ignored(plan)
    actor.remember(plan)
    try:
        outcome = actor.execute(plan)
    except planner.UnsafePlan as err:
        log.error("refusing to act on anything", extra={"reason": str(err), "brake": err.refusal.kind.value})
        actor.record_refusal(plan)
        outcome = actor.outcome
    if done:
        done(outcome)
    paused = plan.paused or pause.found
    code = paused_code(paused, outcome) if paused else exit_code(plan, outcome)
    _summary(settings, plan, outcome, code=code, started=started, api=api, metrics=metrics, guard=guard, paused=paused)
    return code


def decide(api: Api, settings: Settings, now: Callable[[], datetime], *, sightings: Sightings,
           cache: Callable[[Api], Cached] | None = None,
           nodes_now: NodesNow | None = None) -> tuple[Snapshot, planner.Plan]:
    """The snapshot and the plan a pass acts on. The watch cache decides *when* a pass runs, never *what* it
    writes or remembers: every pass judges both brakes on the node list as of a consistent read made now (the
    watch cache's nodes once it provably caught up with one, `nodes_now`: the same moment, without 50 MB at 5,000
    nodes; else a consistent list), so a storm the cache has not seen is still found and remembered. A plan that
    would write anything (planner.Plan.writes, brakes or not, a storm moment included) is thrown away and made
    again from a live, consistent read of everything the cache stood in for (the fences, our records, the
    control ConfigMap) and of the Leases (observe.observe_again). Only that plan is acted on."""
    snapshot = observe(api, settings, now, sightings=sightings, cache=cache, nodes_now=nodes_now)
    plan = planner.plan(snapshot, settings)
    if cache is None or not plan.writes:
        return snapshot, plan
    log.info("the cached plan writes: reading live before acting",
             extra={"pods_planned": plan.pod_count, "attachments_planned": plan.attachment_count,
                    "nodes_not_ready": plan.not_ready, "nodes": plan.total_nodes})
    live = observe_again(api, settings, now, sightings=sightings, earlier=snapshot, nodes_now=nodes_now)
    live_plan = planner.plan(live, settings)
    if (live_plan.refusal, live_plan.not_ready, live_plan.total_nodes, live_plan.pod_count) != \
            (plan.refusal, plan.not_ready, plan.total_nodes, plan.pod_count):
        log.warning("the live read differs from the watch cache; acting on the live plan",
                    extra={"nodes_not_ready": live_plan.not_ready, "cached_nodes_not_ready": plan.not_ready,
                           "nodes": live_plan.total_nodes, "cached_nodes": plan.total_nodes,
                           "pods_planned": live_plan.pod_count, "cached_pods_planned": plan.pod_count,
                           "brake": live_plan.refusal.kind.value if live_plan.refusal else ""})
    return live, live_plan


def paused_code(paused: Pause, outcome: Outcome) -> int:
    """A paused pass (issue 36): an operator's pause is no failure, 0, so a CronJob's Job succeeds and no stock
    KubeJobFailed alert pages anyone for what was chosen (the summary's `paused` and rwo_failover_paused say it);
    a write of this pass that failed or was denied before the pause was seen is still 1 or 5. A switch that
    cannot be read is 4: nothing was written, and someone must make it readable."""
    if outcome.forbidden:
        return EXIT_FORBIDDEN
    if outcome.failures:
        return EXIT_FAILED
    return EXIT_OK if paused.chosen else EXIT_UNAVAILABLE


def exit_code(plan: planner.Plan, outcome: Outcome) -> int:
    if outcome.forbidden:
        return EXIT_FORBIDDEN
    if plan.refusal or outcome.split_brain:
        return EXIT_REFUSED
    return EXIT_FAILED if outcome.failures or outcome.not_attempted or outcome.unconfirmed else EXIT_OK


def _log_plan(plan: planner.Plan) -> None:
    for verdict in plan.verdicts:
        log.info("node verdict", extra={"node": verdict.node, "state": verdict.state.value,
                                        "taint": verdict.taint, "reason": verdict.reason})
    for skip in plan.skips:
        log.info("skipped", extra={"kind": skip.kind, "object": skip.name, "reason": skip.reason})
    for node_plan in plan.nodes:
        if not node_plan.has_work:  # a stopped instance, say: a log line, never an Event
            log.info("proven down, nothing to do", extra={"node": node_plan.verdict.node})


def _summary(settings: Settings, plan: planner.Plan | None, outcome: Outcome | None, *, code: int,
             started: float, api: Api, metrics: Metrics | None, guard: Guard | None,
             paused: Pause = NOT_PAUSED) -> None:
    seconds = time.monotonic() - started
    if metrics:
        metrics.record_pass(plan, outcome, code, seconds=seconds, paused=paused)
    fields: dict[str, object] = {"dry_run": settings.dry_run, "exit_code": code,
                                 "duration_seconds": round(seconds, 3), "api_attempts": api.attempts,
                                 "stopped_by": (guard() if guard else None) or "", "paused": str(paused)}
    if plan is not None:
        states = [v.state for v in plan.verdicts]
        fields.update(nodes=plan.total_nodes, nodes_not_ready=plan.not_ready, tainted=len(states),
                      down=states.count(planner.NodeState.DOWN), not_yet=states.count(planner.NodeState.NOT_YET),
                      split_brain=states.count(planner.NodeState.SPLIT_BRAIN),
                      recovering=states.count(planner.NodeState.RECOVERING), pods_planned=plan.pod_count,
                      pods_deferred=len(plan.deferred),
                      attachments_planned=plan.attachment_count, skips=len(plan.skips),
                      refusal=str(plan.refusal or ""), brake=plan.refusal.kind.value if plan.refusal else "")
    if outcome is not None:
        fields.update(pods_deleted=len(outcome.pods_deleted), pods_already_gone=len(outcome.pods_gone),
                      pods_replaced=len(outcome.pods_replaced),
                      attachments_deleted=len(outcome.attachments_deleted),
                      attachments_already_gone=len(outcome.attachments_gone),
                      attachments_held=len(outcome.attachments_held),
                      attachments_replaced=len(outcome.attachments_replaced),
                      nodes_not_down_on_recheck=len(outcome.nodes_not_down_on_recheck),
                      taints_added=len(outcome.taints_added), taints_removed=len(outcome.taints_removed),
                      events=outcome.events, failures=len(outcome.failures) + len(outcome.forbidden),
                      not_attempted=len(outcome.not_attempted), unconfirmed=len(outcome.unconfirmed),
                      fenced=len(outcome.fenced), fencing_pending=len(outcome.fencing_pending),
                      powered_off=len(outcome.powered_off),
                      unfenced=len(outcome.unfenced))
    if plan is not None:
        fields.update(recovered=sum(1 for v in plan.recovery if v.state == "recovered"),
                      not_recovered=sum(1 for v in plan.recovery if v.state == "not-recovered"),
                      recovery_pending=sum(1 for v in plan.recovery if v.state == "waiting"))
    log.log(logging.INFO if code == EXIT_OK else logging.ERROR, "pass finished", extra=fields)
