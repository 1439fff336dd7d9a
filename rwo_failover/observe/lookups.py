"""The reads observe makes object by object: claims and PVs (a GET each, or one list past gets_before_list()),
the pods a recovery record needs, and the server version."""

from __future__ import annotations

import logging
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from datetime import datetime, timedelta
from typing import Any, TypeVar

from ..kube import Api, ApiError
from ..model import Attachment, Claim, Json, Pod, Reader, Volume, is_name
from ..planner.recovery import Record
from ..settings import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")
Key = str | tuple[str, ...]  # a cluster-scoped object's name, or a namespaced one's (namespace, name)

# Up to this many objects, a GET each; beyond it, one cluster-wide list. A list costs what the cluster holds, GETs
# what the pass needs, so the bound grows with the cluster, measured by its nodes: at 5,000 nodes (20,000 claims
# and PVs in bench/steady.py) a list of either took 0.26-0.30 s of a pass, as long as about 100 GETs; on
# kube-apiserver v1.36.2 a list of 2,000 claims took as long as 34 GETs. Nodes do not say how many claims a list
# would hold, and tenants choose how many their pods mount, so the bound stops at GETS_AT_MOST.
GETS_BEFORE_LIST = 20
NODES_PER_GET = 50
GETS_AT_MOST = 100


def gets_before_list(nodes: int) -> int:
    """How many objects of a kind a pass reads with a GET each in a cluster of `nodes` nodes, before it lists."""
    return min(GETS_AT_MOST, max(GETS_BEFORE_LIST, nodes // NODES_PER_GET))


def recovery_pods(api: Api, settings: Settings, reader: Reader, *, records: list[Record],
                  attachments: tuple[Attachment, ...], now: datetime) -> tuple[Pod, ...]:
    """The pods that may be the replacements of freed pods, and the freed pods if they are still there.

    A StatefulSet's replacement has the freed pod's name: one GET. Another controller's may have any name, and
    it can be confirmed only once its volume's VolumeAttachment on its node is attached: so the pods on the
    nodes the record's PV has an attachment on, and on the dead node (the freed pod, if its delete failed), one
    list each by spec.nodeName, whatever the number of records there. Only a record due to time out now has its
    namespace listed, so its RWOVolumeNotRecovered says exactly what is missing (a replacement not scheduled,
    not attached). Listing every such namespace every pass, until confirmed, made each pass of continuous mode
    take seconds next to a namespace of 3,000 pods (bench/steady.py). Either list converts only the pods that
    mount a record's claim or are a freed pod (kube.keep.mounting)."""
    others = [r for r in records if not r.statefulset]
    due = due_namespaces(records, settings, now)
    volumes = {r.volume for r in others if r.namespace not in due}
    nodes = sorted({r.node for r in others if r.namespace not in due} |
                   {a.node for a in attachments if a.volume in volumes and a.node})
    wanted = ({r.claim.partition("/")[2] for r in others}, {r.uid for r in others})
    convert = reader.parse("pod", Pod.from_json)
    pods = [p for ns in due for p in reader.each(api.list_pods_in(ns, convert, wanted))]
    namespaces = {r.namespace for r in others}
    pods += [p for node in nodes for p in reader.each(api.list_pods_on(node, convert, mounting=wanted))
             if p.namespace in namespaces]
    for record in sorted((r for r in records if r.statefulset), key=lambda r: r.claim):
        found = reader.one("pod", Pod.from_json, api.read_pod(record.namespace, record.pod))
        if found is not None:
            pods.append(found)
    return tuple({p.uid or p.key: p for p in pods}.values())


def due_namespaces(records: list[Record], settings: Settings, now: datetime) -> list[str]:
    """The namespaces whose pods recovery_pods lists at `now`: those of non-StatefulSet records due to time out."""
    return sorted({r.namespace for r in records if not r.statefulset and
                   now >= r.deleted_at + timedelta(seconds=settings.recovery_timeout_seconds)})


def server_version(api: Api) -> tuple[int, int] | None:
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


def get_or_list(reader: Reader, kind: str, from_json: Callable[[Any], T], *, keys: AbstractSet[Key],
                get: Callable[..., Json | None],
                list_all: Callable[[Callable[[Any], T | None], AbstractSet[Any]], list[T | None]],
                key_of: Callable[[T], object], gets: int = GETS_BEFORE_LIST) -> list[T]:
    """A GET per object when few are needed; past that, one paginated cluster-wide list is cheaper. Only the
    objects asked for count: an unreadable one elsewhere in that list is none of this pass's business, and the
    list converts only those (`list_all` is given the keys). A key that is no valid name (a tenant wrote it)
    cannot exist, and is never put in a request path."""
    keys = {key for key in keys if (is_name(key[0], namespace=True) and is_name(key[1]) if isinstance(key, tuple)
                                    else is_name(key))}
    if len(keys) <= gets:
        convert = reader.parse(kind, from_json)
        found = (get(*key) if isinstance(key, tuple) else get(key) for key in sorted(keys))
        return Reader.each(convert(obj) for obj in found if obj is not None)
    local = Reader()
    listed = [obj for obj in local.each(list_all(local.parse(kind, from_json), keys)) if key_of(obj) in keys]
    wanted = {"/".join(key) if isinstance(key, tuple) else key for key in keys}
    reader.unreadable += [u for u in local.unreadable if u.name in wanted]
    return listed


def read_claims(api: Api, reader: Reader, keys: AbstractSet[tuple[str, ...]], *,
                gets: int = GETS_BEFORE_LIST) -> dict[str, Claim]:
    found = get_or_list(reader, "persistentvolumeclaim", Claim.from_json, keys=keys, get=api.read_claim,
                        list_all=api.list_claims, key_of=lambda c: (c.namespace, c.name), gets=gets)
    return {c.key: c for c in found}


def read_volumes(api: Api, reader: Reader, names: AbstractSet[str], *,
                 gets: int = GETS_BEFORE_LIST) -> dict[str, Volume]:
    return {v.name: v for v in get_or_list(reader, "persistentvolume", Volume.from_json, keys=names,
                                           get=api.read_volume, list_all=api.list_volumes, key_of=lambda v: v.name,
                                           gets=gets)}
