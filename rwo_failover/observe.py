"""Observe: read what one pass needs, and no more.

Cost: one paginated node list, one GET per Lease of a tainted node (or one carrying our taint), one
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
from typing import Any, Callable, Iterable, Optional, TypeVar

from .client import Api, ApiError, Forbidden
from .config import Settings
from .model import (RECOVERY_LABEL, Attachment, BadObject, Claim, Fence, Lease, Node, Pod, RecoveryEntry, Snapshot,
                    Unreadable, Volume, is_name)
from .planner import nodes_to_inspect, tainted_nodes
from .planner.recovery import Record, readable

log = logging.getLogger("rwo_failover")
T = TypeVar("T")

# Beyond this many objects, one cluster-wide list (at most a few pages) costs fewer requests than a GET each.
GETS_BEFORE_LIST = 20


def name_of(raw: Any) -> str:
    """The object's namespace/name, as far as it can be read: what a skip names."""
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        return "(no name)"
    namespace = meta.get("namespace")
    return (f"{namespace}/{name}" if isinstance(namespace, str) and namespace else name)[:300]


class Reader:
    """Converts API JSON into model objects through their from_json. An object that cannot be read is kept
    as an Unreadable, with its reason: observe never raises for an object's content."""

    def __init__(self) -> None:
        self.unreadable: list[Unreadable] = []

    def parse(self, kind: str, from_json: Callable[[Any], T], node: str = "") -> Callable[[Any], Optional[T]]:
        def convert(raw: Any) -> Optional[T]:
            try:
                if not isinstance(raw, dict):
                    raise BadObject(f"not a JSON object but {type(raw).__name__}")
                return from_json(raw)
            except BadObject as err:
                self.unreadable.append(Unreadable(kind, name_of(raw), str(err)[:300], node))
                return None
        return convert

    @staticmethod
    def each(found: Iterable[Optional[T]]) -> list[T]:
        return [obj for obj in found if obj is not None]

    def one(self, kind: str, from_json: Callable[[Any], T], raw: Optional[dict], node: str = "") -> Optional[T]:
        return None if raw is None else self.parse(kind, from_json, node)(raw)


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


@dataclasses.dataclass(frozen=True)
class Cached:
    """What a pass takes from continuous mode's watches (watch.py) instead of listing: the same slim objects a
    list gives, and the objects the watches could not read, each an Unreadable as a list's would be."""

    nodes: tuple[Node, ...]
    fences: tuple[Fence, ...]
    recovery_records: tuple[RecoveryEntry, ...]
    unreadable: tuple[Unreadable, ...]


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
    if not cached or watched or cached.recovery_records:  # a pass from the cache with nothing to judge reads nothing
        check_server_clock(api)
    leases = {name: reader.one("lease", Lease.from_json, api.read_lease(name), name) for name in sorted(watched)}
    nodes = _unknown_stays_unknown(nodes, reader.unreadable)
    snapshot = Snapshot(now(), nodes, leases, fences=fences)
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
    claims = _read_claims(api, reader, {(p.namespace, c) for p in pods if not p.mirror for c in p.claims} |
                          {tuple(r.claim.split("/", 1)) for r in records})
    wanted, recovering_volumes = set(inspect), {r.volume for r in records}
    attachments = tuple(a for a in reader.each(api.list_attachments(reader.parse("volumeattachment",
                                                                                 Attachment.from_json)))
                        if a.node in wanted or a.volume in recovering_volumes)
    volumes = _read_volumes(api, reader, {c.volume for c in claims.values() if c.volume} |
                            {a.volume for a in attachments if a.volume} | recovering_volumes)
    # An attachment whose pod is gone is found through its PV's claim, which no pod led us to.
    claims.update(_read_claims(api, reader, {tuple(v.claim.split("/", 1)) for v in volumes.values()
                                             if v.claim and v.claim not in claims}))
    version = _server_version(api) if settings.out_of_service_taint == "auto" and inspect else None
    return Snapshot(snapshot.now, nodes, leases, pods, claims, attachments, volumes, version, fences, entries,
                    _recovery_pods(api, reader, records), tuple(reader.unreadable))


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


def _recovery_pods(api: Api, reader: Reader, records: list[Record]) -> tuple[Pod, ...]:
    """A StatefulSet's replacement has the freed pod's name: one GET. Another controller's may have any name:
    one list of the namespace's pods, once per namespace whatever the number of its records."""
    listed = sorted({r.namespace for r in records if not r.statefulset})
    pods = [p for ns in listed for p in reader.each(api.list_pods_in(ns, reader.parse("pod", Pod.from_json)))]
    for record in sorted((r for r in records if r.statefulset and r.namespace not in listed), key=lambda r: r.claim):
        found = reader.one("pod", Pod.from_json, api.read_pod(record.namespace, record.pod))
        if found is not None:
            pods.append(found)
    return tuple({p.uid or p.key: p for p in pods}.values())


def _server_version(api: Api) -> Optional[tuple[int, int]]:
    """The version only decides whether to add the out-of-service taint, so not knowing it must not stop
    the pass: the pod and attachment deletes work on every version."""
    try:
        found = api.server_version()
    except ApiError as err:
        log.warning("cannot read the server version; not adding the out-of-service taint", extra={"error": str(err)})
        return None
    if found is None:
        log.warning("server version not understood; not adding the out-of-service taint")
    return found


def _get_or_list(reader: Reader, kind: str, from_json: Callable[[Any], T], keys: set,
                 get: Callable[..., Optional[dict]], list_all: Callable[[Callable[[Any], Any]], list],
                 key_of: Callable[[T], object]) -> list[T]:
    """A GET per object when few are needed; past that, one paginated cluster-wide list is cheaper. Only the
    objects asked for count: an unreadable one elsewhere in that list is none of this pass's business. A key
    that is no valid name (a tenant wrote it) cannot exist, and is never put in a request path."""
    keys = {key for key in keys if (is_name(key[0], namespace=True) and is_name(key[1]) if isinstance(key, tuple)
                                    else is_name(key))}
    if len(keys) <= GETS_BEFORE_LIST:
        convert = reader.parse(kind, from_json)
        found = (get(*key) if isinstance(key, tuple) else get(key) for key in sorted(keys))
        return Reader.each(convert(obj) for obj in found if obj is not None)
    local = Reader()
    listed = [obj for obj in local.each(list_all(local.parse(kind, from_json))) if key_of(obj) in keys]
    wanted = {"/".join(key) if isinstance(key, tuple) else key for key in keys}
    reader.unreadable += [u for u in local.unreadable if u.name in wanted]
    return listed


def _read_claims(api: Api, reader: Reader, keys: set) -> dict[str, Claim]:
    found = _get_or_list(reader, "persistentvolumeclaim", Claim.from_json, keys, api.read_claim, api.list_claims,
                         lambda c: (c.namespace, c.name))
    return {c.key: c for c in found}


def _read_volumes(api: Api, reader: Reader, names: set) -> dict[str, Volume]:
    return {v.name: v for v in _get_or_list(reader, "persistentvolume", Volume.from_json, names, api.read_volume,
                                            api.list_volumes, lambda v: v.name)}
