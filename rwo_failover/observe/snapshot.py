"""Observe: read what one pass needs, and no more, into a Snapshot.

Cost: one paginated node list, one GET per Lease of a tainted node (or one carrying our taint), one
label-selected list each of our recovery records and of our taint records, and, only when a node is proven
down or back from an outage with our taint: one field-selected pod list per such node, the claims of its pods
and the PVs those claims and the node's attachments name (a GET each, or one paginated list past 20, or one per
50 nodes in a larger cluster, at most 100), and one paginated VolumeAttachment list. All pods in the cluster are
never listed. Each recovery record adds at most its claim, its PV and one pod GET (a StatefulSet's) or one list of
its namespace's pods (other controllers).

Every object goes through one Reader: an object that cannot be read becomes an Unreadable (a skip with its
reason), never an exception out of the pass.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from datetime import datetime

from ..kube import Api, Forbidden
from ..model import (
    RECOVERY_LABEL,
    TAINT_RECORD_LABEL,
    Attachment,
    Cached,
    Fence,
    Lease,
    Node,
    Pod,
    Reader,
    RecoveryEntry,
    Snapshot,
    TaintRecord,
    Unreadable,
)
from ..planner import nodes_to_inspect, tainted_nodes
from ..planner.recovery import readable
from ..settings import Settings
from .control import read_control
from .lookups import due_namespaces, gets_before_list, read_claims, read_volumes, recovery_pods, server_version
from .sightings import Sightings

log = logging.getLogger(__name__)


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


# What the first reads of a pass hold (the cache stands in for the lists); everything else is read by node.
BASE_KINDS = frozenset({"node", "lease", "networkfence", "recovery record", "taint record"})


def observe(api: Api, settings: Settings, now: Callable[[], datetime], *, sightings: Sightings,
            cache: Callable[[Api], Cached] | None = None,
            nodes_now: Callable[[Api], tuple[Node | Unreadable, ...] | None] | None = None) -> Snapshot:
    """`now` is read after the nodes and Leases, so ages are judged against the time of the reads. With a
    `cache` (continuous mode's watches), fences and our records come from it instead of lists; the nodes, which
    both brakes judge, never do unless the cache has provably caught up with a consistent read made now
    (`nodes_now`): else they are listed, consistently. Every list here is consistent (kube/lists.py).
    `sightings` is this process's memory of when it first saw each node Ready=Unknown."""
    reader = Reader()
    snapshot = _base(api, settings, now, reader=reader, sightings=sightings, cache=cache,
                     nodes_at=nodes_now(api) if cache and nodes_now else None)
    return _details(api, settings, reader, snapshot=snapshot)


def observe_again(api: Api, settings: Settings, now: Callable[[], datetime], *, sightings: Sightings,
                  earlier: Snapshot,
                  nodes_now: Callable[[Api], tuple[Node | Unreadable, ...] | None] | None = None) -> Snapshot:
    """What a pass judged from the cache, read again live before it writes (run/runner.py): the nodes, fences and
    recovery records listed at the latest version (no resourceVersion: a quorum read, never the API server's
    watch cache), then the Leases. `nodes_now` may stand in for the node list: the watch cache's nodes once it
    has caught up with a consistent read made now (kube.cache.WatchedCluster.nodes_now), None when it has not.
    The pods, claims, PVs and attachments `earlier` read (live, moments ago) are kept when the live read leads
    to no node and no record that `earlier` did not read them for, and no record comes due between the two reads
    (recovery_pods reads more for a due one); else they are read again too."""
    reader = Reader()
    caught_up = nodes_now(api) if nodes_now else None
    snapshot = _base(api, settings, now, reader=reader, sightings=sightings, cache=None, nodes_at=caught_up)
    inspect, before = set(nodes_to_inspect(snapshot, settings)), set(nodes_to_inspect(earlier, settings))
    records = readable(snapshot.recovery_records)
    if not inspect <= before or any(e not in earlier.recovery_records for e in snapshot.recovery_records) or \
            due_namespaces(records, settings, snapshot.now) != due_namespaces(records, settings, earlier.now):
        return _details(api, settings, reader, snapshot=snapshot)
    return dataclasses.replace(snapshot, pods=tuple(p for p in earlier.pods if p.node in inspect),
                               claims=earlier.claims, attachments=earlier.attachments, volumes=earlier.volumes,
                               server_version=earlier.server_version, recovery_pods=earlier.recovery_pods,
                               unreadable=snapshot.unreadable + tuple(u for u in earlier.unreadable
                                                                      if u.kind not in BASE_KINDS))


def _base(api: Api, settings: Settings, now: Callable[[], datetime], *, reader: Reader, sightings: Sightings,
          cache: Callable[[Api], Cached] | None, nodes_at: tuple[Node | Unreadable, ...] | None = None) -> Snapshot:
    """The nodes (listed, or `nodes_at`: the nodes and Unreadables as of a consistent read), the fences and our
    records (from the cache, or listed), and the Leases of the nodes judged."""
    cached = cache(api) if cache else None
    if cached:  # the cache's nodes are never judged: only its fences and records, and what of them it could not read
        reader.unreadable.extend(u for u in cached.unreadable if u.kind != "node")
    if nodes_at is not None:
        reader.unreadable.extend(u for u in nodes_at if isinstance(u, Unreadable))
        listed = [n for n in nodes_at if not isinstance(n, Unreadable)]
    else:
        listed = reader.each(api.list_nodes(reader.parse("node", Node.from_json)))
    nodes = tuple({n.name: n for n in listed}.values())  # keyed by name: never judged with a node twice
    # Which out-of-service taint is ours is read from our records, never from the Node (its kubelet writes there).
    records = {r.name: r for r in (cached.taint_records if cached else reader.each(api.list_taint_records(
        settings.recovery_namespace, TAINT_RECORD_LABEL, reader.parse("taint record", TaintRecord.from_json))))}
    if records:
        nodes = tuple(n.with_record(records) for n in nodes)
    fences = {f.node: f for f in (cached.fences if cached else reader.each(
        api.list_networkfences(reader.parse("networkfence", Fence.from_json))))} \
        if settings.fencing == "networkfence" else {}
    names = {n.name for n in nodes}
    marked = [n for n in nodes if n.marked]
    watched = {n.name for n, _ in tainted_nodes(marked, settings)} | {n.name for n in marked if n.our_taint} | \
        {name for name, f in fences.items() if f.ours and name in names}
    if settings.fencing == "redfish":  # a silent Lease is what starts it: every node's is read (one GET each),
        watched |= names  # opted-out nodes' too: the silent brake counts a node whose Lease it has not read as silent
    if not cached or watched or cached.recovery_records:  # a pass from the cache with nothing to judge stamps nothing
        check_server_clock(api)
    leases = {name: reader.one("lease", Lease.from_json, api.read_lease(name), node=name) for name in sorted(watched)}
    nodes = _unknown_stays_unknown(nodes, reader.unreadable)
    # In continuous mode the watched copy (the write guard also asks it before every write); otherwise one read,
    # live in the re-read before writes.
    control, control_error = (cached.control, cached.control_error) if cached else read_control(api, settings)
    at = now()
    entries = cached.recovery_records if cached else tuple(reader.each(api.list_recovery_records(
        settings.recovery_namespace, RECOVERY_LABEL, reader.parse("recovery record", RecoveryEntry.from_json))))
    return Snapshot(at, nodes, leases, fences=fences, recovery_records=entries, unreadable=tuple(reader.unreadable),
                    control=control, control_error=control_error, taint_records=records,
                    unknown_for=sightings.update(nodes), lease_seen_for=sightings.leases(leases, names))


def _details(api: Api, settings: Settings, reader: Reader, *, snapshot: Snapshot) -> Snapshot:
    """The pods, claims, PVs and attachments of the nodes to inspect and of the recovery records."""
    entries = snapshot.recovery_records
    records = readable(entries)
    inspect = nodes_to_inspect(snapshot, settings)
    if not inspect and not records:
        return snapshot
    pods = tuple(p for name in inspect for p in reader.each(api.list_pods_on(name, reader.parse("pod", Pod.from_json,
                                                                                                   name))))
    gets = gets_before_list(len(snapshot.nodes))
    # Every pod's claims but a mirror pod's (it cannot mount one): a DaemonSet pod's too, since an opt-out on
    # its claim must keep our taint off the node, attachment or not.
    claims = read_claims(api, reader, {(p.namespace, c) for p in pods if not p.mirror for c in p.claims} |
                          {tuple(r.claim.split("/", 1)) for r in records}, gets=gets)
    wanted, recovering_volumes = set(inspect), {r.volume for r in records}
    attachments = tuple(a for a in reader.each(api.list_attachments(reader.parse("volumeattachment",
                                                                                 Attachment.from_json),
                                                                    wanted, recovering_volumes))
                        if a.node in wanted or a.volume in recovering_volumes)
    volumes = read_volumes(api, reader, {c.volume for c in claims.values() if c.volume} |
                            {a.volume for a in attachments if a.volume} | recovering_volumes, gets=gets)
    # An attachment whose pod is gone is found through its PV's claim, which no pod led us to.
    claims.update(read_claims(api, reader, {tuple(v.claim.split("/", 1)) for v in volumes.values()
                                             if v.claim and v.claim not in claims}, gets=gets))
    version = server_version(api) if settings.out_of_service_taint == "auto" and inspect else None
    replacing = recovery_pods(api, settings, reader, records=records, attachments=attachments, now=snapshot.now)
    return Snapshot(snapshot.now, snapshot.nodes, snapshot.leases, pods, claims, attachments, volumes, version,
                    snapshot.fences, entries, replacing, tuple(reader.unreadable), snapshot.control,
                    snapshot.control_error, snapshot.taint_records, snapshot.unknown_for,
                    snapshot.lease_seen_for)


def _unknown_stays_unknown(nodes: tuple[Node, ...], unreadable: list[Unreadable]) -> tuple[Node, ...]:
    """A node we cannot read, or whose Lease we cannot read, stays in the snapshot as a node we know nothing
    about: no taint, no Ready condition. So it is never judged, never acted on, never unfenced, and the
    unhealthy-fraction brake counts it as not Ready, which errs toward braking."""
    blind = {u.node for u in unreadable if u.kind == "lease"}
    if not blind and not any(u.kind == "node" for u in unreadable):
        return nodes  # nearly every pass: no node to blank (a copy of 5,000 nodes a pass, for nothing)
    known = tuple(Node(n.name) if n.name in blind else n for n in nodes)
    names = {n.name for n in known}
    lost = [u.name if u.name not in names else f"{u.name} (unreadable #{i})"
            for i, u in enumerate(unreadable) if u.kind == "node"]
    return known + tuple(Node(name) for name in dict.fromkeys(lost))
