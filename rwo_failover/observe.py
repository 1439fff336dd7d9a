"""Observe: read what one pass needs, and no more.

Cost: one paginated node list, one GET per Lease of a tainted node (or one carrying our taint), and, only
when a node is proven down or back from an outage with our taint: one field-selected pod list per such
node, the claims of its pods and the PVs those claims and the node's attachments name (a GET each, or one
paginated list past 20), and one paginated VolumeAttachment list. All pods in the cluster are never listed.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Callable, Optional, TypeVar

from .client import Api, ApiError
from .config import Settings
from .model import RECOVERY_LABEL, Attachment, Claim, Fence, Lease, Node, Pod, Snapshot, Volume
from .planner import nodes_to_inspect, tainted_nodes
from .planner.pods import exempt
from .watch import Cached

log = logging.getLogger("rwo_failover")
T = TypeVar("T")

# Beyond this many objects, one cluster-wide list (at most a few pages) costs fewer requests than a GET each.
GETS_BEFORE_LIST = 20


def observe(api: Api, settings: Settings, now: Callable[[], datetime],
            cache: Optional[Callable[[Api], Cached]] = None) -> Snapshot:
    """`now` is read after the nodes and Leases, so ages are judged against the time of the reads. With a
    `cache` (continuous mode's watches), nodes, fences and recovering claims come from it instead of lists."""
    cached = cache(api) if cache else None
    # Keyed by name: a list is never judged with an object twice.
    nodes = cached.nodes if cached else tuple({n.name: n for n in api.list_nodes(Node.from_json)}.values())
    fences = cached.fences if cached else {f.node: f for f in api.list_networkfences(Fence.from_json)} \
        if settings.fencing == "networkfence" else {}
    names = {n.name for n in nodes}
    watched = {n.name for n, _ in tainted_nodes(nodes, settings)} | {n.name for n in nodes if n.our_taint} | \
        {name for name, f in fences.items() if f.ours and name in names}
    leases = {name: _lease(api, name) for name in sorted(watched)}
    snapshot = Snapshot(now(), nodes, leases, fences=fences)
    recovering = cached.recovering if cached else tuple(api.list_claims_labelled(RECOVERY_LABEL, Claim.from_json))
    namespace_pods = tuple(p for ns in sorted({c.namespace for c in recovering})
                           for p in api.list_pods_in(ns, Pod.from_json))
    inspect = nodes_to_inspect(snapshot, settings)
    if not inspect and not recovering:
        return snapshot
    pods = tuple(p for name in inspect for p in api.list_pods_on(name, Pod.from_json))
    claims = _read_claims(api, {(p.namespace, c) for p in pods if not exempt(p) for c in p.claims})
    wanted, recovering_volumes = set(inspect), {c.volume for c in recovering}
    attachments = tuple(a for a in api.list_attachments(Attachment.from_json)
                        if a.node in wanted or a.volume in recovering_volumes)
    volumes = _read_volumes(api, {c.volume for c in claims.values() if c.volume} |
                            {a.volume for a in attachments if a.volume})
    # An attachment whose pod is gone is found through its PV's claim, which no pod led us to.
    claims.update(_read_claims(api, {tuple(v.claim.split("/", 1)) for v in volumes.values()
                                     if v.claim and v.claim not in claims}))
    version = _server_version(api) if settings.out_of_service_taint == "auto" and inspect else None
    return Snapshot(snapshot.now, nodes, leases, pods, claims, attachments, volumes, version, fences, recovering,
                    namespace_pods)


def _lease(api: Api, node: str) -> Optional[Lease]:
    found = api.read_lease(node)
    return Lease.from_json(found) if found else None


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


def _get_or_list(keys: set, get: Callable[..., Optional[dict]], list_all: Callable[[Callable[[dict], T]], list[T]],
                 convert: Callable[[dict], T], key_of: Callable[[T], object]) -> list[T]:
    """A GET per object when few are needed; past that, one paginated cluster-wide list is cheaper."""
    if len(keys) > GETS_BEFORE_LIST:
        return [obj for obj in list_all(convert) if key_of(obj) in keys]
    found = (get(*key) if isinstance(key, tuple) else get(key) for key in sorted(keys))
    return [convert(obj) for obj in found if obj]


def _read_claims(api: Api, keys: set) -> dict[str, Claim]:
    found = _get_or_list(keys, api.read_claim, api.list_claims, Claim.from_json,
                         lambda c: (c.namespace, c.name))
    return {c.key: c for c in found}


def _read_volumes(api: Api, names: set) -> dict[str, Volume]:
    return {v.name: v for v in _get_or_list(names, api.read_volume, api.list_volumes, Volume.from_json,
                                            lambda v: v.name)}
