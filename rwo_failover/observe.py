"""Observe: read what one pass needs, and no more.

Cost: one paginated node list, one GET per tainted node's Lease, one
field-selected pod list per proven-down node, one GET per claim of an
eligible pod, and one paginated VolumeAttachment list, only when there is a
claim to release. All pods in the cluster are never listed.
"""

from __future__ import annotations

from datetime import datetime

from .client import Api
from .config import Settings
from .decide import Snapshot, nodes_to_inspect, pod_exclusion, tainted_nodes
from .model import Attachment, Claim, Lease, Node, Pod


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
    claims = _read_claims(api, [p for p in pods if pod_exclusion(p, settings) is None])
    attachments: tuple[Attachment, ...] = ()
    if any(c.rwo and c.volume for c in claims.values()):
        wanted = set(down)
        attachments = tuple(a for a in (Attachment.from_json(o) for o in api.list_attachments()) if a.node in wanted)
    return Snapshot(now, nodes, leases, pods, claims, attachments)


def _read_claims(api: Api, pods: list[Pod]) -> dict[str, Claim]:
    wanted = dict.fromkeys((pod.namespace, name) for pod in pods for name in pod.claims)
    claims = (api.read_claim(namespace, name) for namespace, name in wanted)
    return {f"{c.namespace}/{c.name}": c for c in (Claim.from_json(obj) for obj in claims if obj)}
