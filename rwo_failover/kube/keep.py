"""Which items of a cluster-wide list a pass wants, judged on the decoded Struct (kube/shapes.py) before it is
built into a dict and a model object (decode.decode_page's `keep`). A pass reads 30 claims, PVs or attachments
out of 20,000, and the few pods of a namespace of thousands that may replace a freed one; converting the rest
cost most of a pass's reads at 5,000 nodes (bench/scale.py, bench/steady.py).

An item is dropped only when the fields that name it are strings (or absent, read as "" as the model reads
them) and name nothing asked for: then the model object would have been dropped by the caller anyway, and an
item the pass does not read is none of its business even when something else in it cannot be read (it is no
longer a skip line, as get_or_list's lists never made it one). An item with a naming field of another type is
kept, so it is converted and judged (skipped with its reason, or dropped by the caller's own filter) exactly as
when every item was converted."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any


def _text(value: Any) -> str | None:
    """The field as the model reads it (absent is ""), or None when it is not a string."""
    return "" if value is None else value if isinstance(value, str) else None


def named(names: AbstractSet[str]) -> Callable[[Any], bool]:
    """Cluster-scoped objects (PVs) named in `names`."""
    def wanted(item: Any) -> bool:
        name = _text(item.metadata.name if item.metadata is not None else None)
        return name is None or name in names
    return wanted


def named_in(keys: AbstractSet[tuple[str, str]]) -> Callable[[Any], bool]:
    """Namespaced objects (claims) named (namespace, name) in `keys`."""
    def wanted(item: Any) -> bool:
        meta = item.metadata
        name = _text(meta.name if meta is not None else None)
        namespace = _text(meta.namespace if meta is not None else None)
        return name is None or namespace is None or (namespace, name) in keys
    return wanted


def on(nodes: AbstractSet[str], volumes: AbstractSet[str]) -> Callable[[Any], bool]:
    """VolumeAttachments on one of `nodes`, or of one of `volumes` (PV names)."""
    def wanted(item: Any) -> bool:
        spec = item.spec
        node = _text(spec.nodeName if spec is not None else None)
        source = spec.source if spec is not None else None
        volume = _text(source.persistentVolumeName if source is not None else None)
        return node is None or volume is None or node in nodes or volume in volumes
    return wanted


def mounting(claims: AbstractSet[str], uids: AbstractSet[str]) -> Callable[[Any], bool]:
    """Pods that mount one of `claims` (names, in the namespace listed), or whose uid is one of `uids`."""
    def wanted(item: Any) -> bool:
        meta, spec = item.metadata, item.spec
        uid, name = (_text(meta.uid), _text(meta.name)) if meta is not None else ("", "")
        if uid is None or name is None or uid in uids:
            return True
        mounted = [_claim_of(volume, name) for volume in (spec.volumes if spec is not None else None) or ()]
        return any(claim is None or claim in claims for claim in mounted if claim != "")
    return wanted


def _claim_of(volume: Any, pod: str) -> str | None:
    """The claim a pod volume mounts, as model.pod reads it: a PVC's claimName, or a generic ephemeral volume's
    PVC, named <pod>-<volume> by the ephemeral controller; "" for no claim; None when it cannot be told."""
    if volume.persistentVolumeClaim is not None:
        return _text(volume.persistentVolumeClaim.claimName)
    if volume.ephemeral is not None:
        name = _text(volume.name)
        return None if name is None or not isinstance(volume.ephemeral, dict) else f"{pod}-{name}"
    return ""
