"""One-shot mode's wait for a node going quiet: watch it for a shutdown taint, then pass again.

A pass with nothing due (run/once.py) lists the node Leases; when a few nodes not judged yet have missed a
renewal (planner/quiet.py), the run keeps reading just those nodes and their Leases, once a second, within
what is left of ONCE_WAIT_SECONDS and its own deadline. The moment one carries a shutdown taint, the run
passes again and judges everything afresh, live: this wait decides only *when* the next pass runs, never what
it does. A Lease that changes (a renewal) or a node that is gone ends the wait for that node. More quiet
nodes than MAX_NODES_PER_PASS (a partition, or the API server's own trouble) are not waited for: no pass
could act on them anyway. A failed read ends the wait with a warning: the first pass's result stands. So do a
stop signal and a read that ends after the budget (a slow API server): the time kept for the next passes is
spent, and no pass starts after a stop. An opted-out node is never judged, so it is not waited for.
"""

from __future__ import annotations

import logging
import time

from ..act.writer import Guard
from ..kube import Api, ApiError, Forbidden, ServerClockUnknown
from ..observe.quiet import Now, quiet_node_now, quiet_nodes
from ..planner import Plan
from ..settings import Settings

log = logging.getLogger(__name__)
POLL_SECONDS = 1.0
STOP_CHECK_SECONDS = 0.2


def wait_for_taint(api: Api, settings: Settings, plan: Plan, *, budget: float, guard: Guard) -> str | None:
    """A quiet node that now carries a shutdown taint, or None when none did within `budget` seconds."""
    # Every read of the wait (the list, each GET and its retries) ends with the budget, not with the pass
    # deadline: a server that stops answering must not hold the run to PASS_TIMEOUT_SECONDS.
    deadline = api.deadline
    api.deadline = min(deadline, deadline - api.remaining() + budget)
    try:
        return _wait(api, settings, plan, budget=budget, guard=guard)
    except Forbidden as err:  # RBAC from before this wait: it says so on every run until it is applied
        log.warning("cannot watch quiet nodes: RBAC does not grant list on leases in kube-node-lease (apply the "
                    "current rbac.yaml); until then a pass before NotReady leaves the node to the next one",
                    extra={"error": str(err), "setting": "ONCE_WAIT_SECONDS"})
        return None
    except (ApiError, ServerClockUnknown) as err:
        log.warning("stopped watching quiet nodes: a read failed; the next scheduled pass will look again",
                    extra={"error": str(err), "setting": "ONCE_WAIT_SECONDS"})
        return None
    finally:
        api.deadline = deadline


def _wait(api: Api, settings: Settings, plan: Plan, *, budget: float, guard: Guard) -> str | None:
    ends = time.monotonic() + budget
    versions = quiet_nodes(api, {v.node for v in plan.verdicts})
    if not versions:
        return None
    if len(versions) > settings.max_nodes_per_pass:
        log.info("many kubelets went quiet at once; not waiting for them", extra={
            "quiet_nodes": len(versions), "max_nodes_per_pass": settings.max_nodes_per_pass})
        return None
    log.info("kubelets went quiet: watching them for a shutdown taint, then passing again", extra={
        "nodes": sorted(versions), "wait_seconds": round(budget, 1), "setting": "ONCE_WAIT_SECONDS"})
    while versions and _nap(ends, guard):
        for name in sorted(versions):
            now = quiet_node_now(api, settings, name, version=versions[name])
            if not _in_time(ends, guard):  # a slow read outlived the budget, or a stop came: no pass again
                return None
            if now is Now.TAINTED:
                return name
            if now is Now.GONE:
                del versions[name]  # renewed: alive, or at least no longer quiet
    return None


def _in_time(ends: float, guard: Guard) -> bool:
    """Within the budget (what is left after it is kept for the next passes) and no stop asked."""
    return guard() is None and time.monotonic() < ends


def _nap(ends: float, guard: Guard) -> bool:
    """Sleep POLL_SECONDS (in slices, for a stop signal); False once the budget is spent or a stop was asked."""
    end = min(ends, time.monotonic() + POLL_SECONDS)
    while (left := end - time.monotonic()) > 0 and guard() is None:
        time.sleep(min(STOP_CHECK_SECONDS, left))
    return _in_time(ends, guard)
