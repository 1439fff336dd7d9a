"""Observe: read what one pass needs, and no more, into a Snapshot.

Cost: one paginated node list, one GET per Lease of a tainted node (or one carrying our taint; with
FENCING=redfish, of every node), one
label-selected list of our recovery records, and, only when a node is proven down or back from an outage
with our taint: one field-selected pod list per such node, the claims of its pods and the PVs those claims
and the node's attachments name (a GET each, or one paginated list past 20), and one paginated
VolumeAttachment list. All pods in the cluster are never listed. Each recovery record adds at most its
claim, its PV and one pod GET (a StatefulSet's) or one list of its namespace's pods (other controllers).

Every object goes through one Reader: an object that cannot be read becomes an Unreadable (a skip with its
reason), never an exception out of the pass.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime
from typing import Callable, Optional

from ..kube import Api, Forbidden
from ..model import (
    RECOVERY_LABEL,
    Attachment,
    Cached,
    Fence,
    Lease,
    Node,
    Pod,
    Reader,
    RecoveryEntry,
    Snapshot,
    Unreadable,
)
from ..planner import nodes_to_inspect, tainted_nodes
from ..planner.recovery import readable
from ..settings import Settings
from .control import read_control
from .lookups import read_claims, read_volumes, recovery_pods, server_version

log = logging.getLogger("rwo_failover")


def check_server_clock(api: Api) -> None:
    """The Date header is the API server's clock, or nothing is judged: it must agree with the server's own stamp.

    The stamp comes from a server-side dry-run create of an Event. RBAC that denies `create events` (older or
    trimmed RBAC; ours grants it) must not switch failover off: the Date header alone is then trusted, loudly,
    as it was before the cross-check existed. A missing Date header still stops every judgment."""
    try:
        stamp, date = api.server_stamp()
    except Forbidden as err:
        log.warning("cannot cross-check the Date header against the API server's own stamp; trusting the Date "
                    "header alone", extra={"error": str(err)})
        return
    api.server_clock.check(stamp, date)


def observe(api: Api, settings: Settings, now: Callable[[], datetime],
            cache: Optional[Callable[[Api], Cached]] = None) -> Snapshot:
    """`now` is read after the nodes and Leases, so ages are judged against the time of the reads. With a
    `cache` (continuous mode's watches), nodes, fences and recovery records come from it instead of lists."""
    reader = Reader()
    cached = cache(api) if cache else None
    if cached:
        reader.unreadable.extend(cached.unreadable)
    listed = cached.nodes if cached else reader.each(api.list_nodes(reader.parse("node", Node.from_json)))
    nodes = tuple({n.name: n for n in listed}.values())  # keyed by name: never judged with a node twice
    fences = {f.node: f for f in (cached.fences if cached else
                                  reader.each(api.list_networkfences(reader.parse("networkfence", Fence.from_json))))} \
        if settings.fencing == "networkfence" else {}
    names = {n.name for n in nodes}
    watched = {n.name for n, _ in tainted_nodes(nodes, settings)} | {n.name for n in nodes if n.our_taint} | \
        {name for name, f in fences.items() if f.ours and name in names}
    if settings.fencing == "redfish":  # a silent Lease is what starts it: every node's is read (one GET each),
        watched |= names  # opted-out nodes' too: the silent brake counts a node whose Lease it has not read as silent
    if not cached or watched or cached.recovery_records:  # a pass from the cache with nothing to judge reads nothing
        check_server_clock(api)
    leases = {name: reader.one("lease", Lease.from_json, api.read_lease(name), name) for name in sorted(watched)}
    nodes = _unknown_stays_unknown(nodes, reader.unreadable)
    # In continuous mode the watched copy (the write guard also asks it before every write); otherwise one read.
    control, control_error = (cached.control, cached.control_error) if cached else read_control(api, settings)
    snapshot = Snapshot(now(), nodes, leases, fences=fences, control=control, control_error=control_error)
    entries = cached.recovery_records if cached else tuple(reader.each(api.list_recovery_records(
        settings.recovery_namespace, RECOVERY_LABEL, reader.parse("recovery record", RecoveryEntry.from_json))))
    records = readable(entries)
    inspect = nodes_to_inspect(snapshot, settings)
    if not inspect and not records:
        return dataclasses.replace(snapshot, recovery_records=entries, unreadable=tuple(reader.unreadable))
    pods = tuple(p for name in inspect for p in reader.each(api.list_pods_on(name, reader.parse("pod", Pod.from_json,
                                                                                                   name))))
    # Every pod's claims but a mirror pod's (it cannot mount one): a DaemonSet pod's too, since an opt-out on
    # its claim must keep our taint off the node, attachment or not.
    claims = read_claims(api, reader, {(p.namespace, c) for p in pods if not p.mirror for c in p.claims} |
                          {tuple(r.claim.split("/", 1)) for r in records})
    wanted, recovering_volumes = set(inspect), {r.volume for r in records}
    attachments = tuple(a for a in reader.each(api.list_attachments(reader.parse("volumeattachment",
                                                                                 Attachment.from_json)))
                        if a.node in wanted or a.volume in recovering_volumes)
    volumes = read_volumes(api, reader, {c.volume for c in claims.values() if c.volume} |
                            {a.volume for a in attachments if a.volume} | recovering_volumes)
    # An attachment whose pod is gone is found through its PV's claim, which no pod led us to.
    claims.update(read_claims(api, reader, {tuple(v.claim.split("/", 1)) for v in volumes.values()
                                             if v.claim and v.claim not in claims}))
    version = server_version(api) if settings.out_of_service_taint == "auto" and inspect else None
    return Snapshot(snapshot.now, nodes, leases, pods, claims, attachments, volumes, version, fences, entries,
                    recovery_pods(api, reader, records), tuple(reader.unreadable), control, control_error)


def _unknown_stays_unknown(nodes: tuple[Node, ...], unreadable: list[Unreadable]) -> tuple[Node, ...]:
    """A node we cannot read, or whose Lease we cannot read, stays in the snapshot as a node we know nothing
    about: no taint, no Ready condition. So it is never judged, never acted on, never unfenced, and the
    unhealthy-fraction brake counts it as not Ready, which errs toward braking."""
    blind = {u.node for u in unreadable if u.kind == "lease"}
    known = tuple(Node(n.name) if n.name in blind else n for n in nodes)
    names = {n.name for n in known}
    lost = [u.name if u.name not in names else f"{u.name} (unreadable #{i})"
            for i, u in enumerate(unreadable) if u.kind == "node"]
    return known + tuple(Node(name) for name in dict.fromkeys(lost))
