"""Observe: read what one pass needs, and no more.

Cost: one paginated node list, one GET per tainted node's Lease, and, only
when a node is proven down: one field-selected pod list per such node, one GET
per claim of an eligible pod (or, past 20 claims, one paginated PVC list),
one paginated VolumeAttachment list, and one GET
per PV (and its claim) of an attachment on such a node that no pod explains.
All pods in the cluster are never listed.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Optional

from .client import Api, ApiError
from .config import Settings
from .model import Attachment, Claim, Lease, Node, Pod, Snapshot, Volume
from .planner import nodes_to_inspect, pod_exclusion, tainted_nodes

log = logging.getLogger("rwo_failover")


# Beyond this many claims, one cluster-wide PVC list (at most a few pages) costs fewer requests than a GET each.
CLAIM_GETS_BEFORE_LIST = 20


def observe(api: Api, settings: Settings, now: datetime) -> Snapshot:
    nodes = tuple(Node.from_json(obj) for obj in api.list_nodes())
    leases = {}
    for node, _taint in tainted_nodes(nodes, settings):
        found = api.read_lease(node.name)
        leases[node.name] = Lease.from_json(found) if found else None
    snapshot = Snapshot(now, nodes, leases)
    down = nodes_to_inspect(snapshot, settings)
    if not down:
        return snapshot
    pods = tuple(Pod.from_json(obj) for name in down for obj in api.list_pods_on(name))
    claims = _read_claims(api, [(p.namespace, c) for p in pods if pod_exclusion(p, settings) is None
                                for c in p.claims])
    wanted = set(down)
    attachments = tuple(a for a in (Attachment.from_json(o) for o in api.list_attachments()) if a.node in wanted)
    volumes = _read_unexplained_volumes(api, attachments, claims)
    claims.update(_read_claims(api, [tuple(v.claim.split("/", 1)) for v in volumes.values()
                                     if v.claim and v.claim not in claims]))
    version = _server_version(api) if settings.out_of_service_taint == "auto" else None
    return Snapshot(now, nodes, leases, pods, claims, attachments, volumes, version)


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


def _read_claims(api: Api, keys: list) -> dict[str, Claim]:
    """A GET per claim when few are needed; past that, one paginated cluster-wide list is cheaper."""
    wanted = {f"{namespace}/{name}": (namespace, name) for namespace, name in keys}
    if len(wanted) > CLAIM_GETS_BEFORE_LIST:
        listed = (Claim.from_json(obj) for obj in api.list_claims())
        return {c.key: c for c in listed if c.key in wanted}
    found = (api.read_claim(namespace, name) for namespace, name in wanted.values())
    return {c.key: c for c in (Claim.from_json(obj) for obj in found if obj)}


def _read_unexplained_volumes(api: Api, attachments: tuple[Attachment, ...],
                              claims: dict[str, Claim]) -> dict[str, Volume]:
    """The PVs of attachments on down nodes that no claim we read is bound to: candidates for orphans."""
    explained = {c.volume for c in claims.values()}
    names = sorted({a.volume for a in attachments if a.volume and a.volume not in explained})
    found = (api.read_volume(name) for name in names)
    return {v.name: v for v in (Volume.from_json(obj) for obj in found if obj)}
