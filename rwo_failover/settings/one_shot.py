"""The one-shot run's time budget: the arithmetic that start-up (checks.py) and the run (run/once.py) share.

A one-shot run (a CronJob's) is a new process: it proves a node down only after seeing it NotReady itself for the
NotReady wait (observe/sightings.py). Its first pass spends some time before that sighting (start-up, the clock
check, the first node list), then it waits, then a second pass acts, all inside PASS_TIMEOUT_SECONDS, keeping a
third of it for acting. `fits` is that rule, for the run with the time its first pass really took, and for
start-up with FIRST_PASS_SECONDS in its place: a setting start-up accepts fits every run whose first pass takes
no longer, so no accepted setting fails every run on a slow API server.
"""

from __future__ import annotations

from ..model.names import DEFAULT_LEASE_SECONDS
from .table import Settings

# What the run's first pass may spend before its first sighting of a node, counted at start-up: a first node list
# of 5,000 nodes takes a second or two, a few on a loaded API server (docs/performance.md). A run whose first pass
# takes longer is told which PASS_TIMEOUT_SECONDS it needs (run/once.py).
FIRST_PASS_SECONDS = 6.0
# What start-up adds to it: the run's wake margin (0.2 s), the whole-second stamps the proof is timed by, and the
# first pass's own work after its node list.
START_MARGIN_SECONDS = 1.0
# Of the third kept for acting, what the wait for this process's own sighting may take (the acting pass rereads
# what the first one read, so it needs less than a full third).
START_SLACK_SECONDS = 2.0
# Kept, of REDFISH_OFF_WAIT_SECONDS, for the BMC to answer Off after a ForceOff sent late in a run (hardware takes a
# few seconds): a ForceOff sent with no time left to see the Off powers the machine off and fails the pass.
OFF_WAIT_KEPT_SECONDS = 12.0


# Before a ForceOff, a run watches a silent node's Lease itself for its kubelet's renew interval (a quarter of the
# Lease's duration) and 2 s (planner/redfish.py's renews): at the default Lease, 12 s.
LEASE_WATCH_SECONDS = DEFAULT_LEASE_SECONDS / 4 + 2


def own_wait(settings: Settings) -> float:
    """The longest a one-shot run waits for its own sighting, for nodes with the default Lease: the NotReady wait
    (MIN_NOT_READY_SECONDS, or with fencing the fenced wait when shorter, "lease" at the default Lease's duration,
    planner/nodes.py), and with REDFISH_POWER_OFF the Lease watch before a ForceOff if longer."""
    wait = float(settings.min_not_ready_seconds)
    if settings.fencing != "none":
        fenced = settings.fenced_min_not_ready_seconds
        wait = min(wait, float(DEFAULT_LEASE_SECONDS if fenced is None else fenced))
    if off_wait(settings):
        wait = max(wait, LEASE_WATCH_SECONDS)
    return wait


def off_wait(settings: Settings) -> float:
    """What a run keeps for a BMC's Off after its own ForceOff (FENCING=redfish with REDFISH_POWER_OFF), else 0."""
    if settings.fencing == "redfish" and settings.redfish_power_off:
        return min(float(settings.redfish_off_wait_seconds), OFF_WAIT_KEPT_SECONDS)
    return 0.0


def room(settings: Settings) -> float:
    """Seconds a run may spend before its first sighting plus the wait after it: two thirds of
    PASS_TIMEOUT_SECONDS and START_SLACK_SECONDS, less the Off wait kept."""
    return settings.pass_timeout_seconds * 2 / 3 + START_SLACK_SECONDS - off_wait(settings)


def fits(settings: Settings, *, used: float, wait: float) -> bool:
    """Whether a run `used` seconds in may wait `wait` more for its own sighting and still keep its third."""
    return used + wait <= room(settings)


def pass_timeout_needed(settings: Settings, *, used: float, wait: float) -> float:
    """The least PASS_TIMEOUT_SECONDS with which `fits` would hold."""
    return 1.5 * (used + wait + off_wait(settings) - START_SLACK_SECONDS)


def accepted(settings: Settings) -> bool:
    """Start-up's rule: the run's own, for a first pass of FIRST_PASS_SECONDS (and START_MARGIN_SECONDS); a run that
    waits for nothing of its own has nothing to fit."""
    wait = own_wait(settings)
    return wait <= 0 or fits(settings, used=FIRST_PASS_SECONDS + START_MARGIN_SECONDS, wait=wait)
