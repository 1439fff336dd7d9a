"""One-shot mode's earliest sign of an outage: nodes whose kubelet has missed a Lease renewal.

A CronJob passes once a minute, and the cloud's shutdown taint goes on only at NotReady, the node-monitor
grace (50 s upstream) after the last heartbeat. A pass that runs before then sees no taint and nothing to
wait for, and the node waits for the next Job: up to a minute more. A Lease unrenewed past its kubelet's
renew interval (a quarter of its duration, and 2 s of slack), on the API server's clock, is the first sign a
pass can read. It proves nothing and nothing is done with it: one-shot mode only watches those nodes for a
shutdown taint a little longer (run/quiet_wait.py), then passes again and judges everything afresh.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from datetime import datetime, timedelta

from ..model import Lease
from .liveness import STAMP, age
from .redfish import renews

# A cloud's shutdown taint comes within seconds of NotReady, which comes the node-monitor grace (50 s upstream)
# after the last renewal, or it does not come at all (bare metal, where nothing adds it). Past this much silence
# no taint is on its way, and watching such a node would cost every CronJob run its whole wait.
QUIET_AT_MOST = timedelta(seconds=120)


def going_quiet(leases: Iterable[Lease], judged: AbstractSet[str], now: datetime) -> tuple[str, ...]:
    """The nodes (by Lease name) not `judged` already whose Lease has missed a renewal by `now` (the server's
    clock), and not more than QUIET_AT_MOST ago. A Lease stamped later than `now` (two clocks disagree) or never
    stamped is left out: no sign."""
    found = {lease.node for lease in leases
             if lease.node not in judged and lease.changed_at is not None and lease.changed_at <= now + STAMP
             and renews(lease) <= age(now, lease.changed_at + STAMP) <= QUIET_AT_MOST.total_seconds()}
    return tuple(sorted(found))
