"""A Pod: where it runs, whether it is stuck, what it mounts, and who owns it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from .fields import Json, bool_at, items_at, obj_at, opted_out, ready_condition, strings_at, text_at, time_at, typed_at
from .names import MIRROR_ANNOTATION


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    uid: str
    node: str
    labels: Mapping[str, str] = field(default_factory=dict)
    controller_kind: str | None = None
    mirror: bool = False
    opted_out: bool = False
    deleting: bool = False
    phase: str | None = None
    reason: str | None = None
    ready: str | None = None  # None when the pod has no Ready condition: it never started
    claims: tuple[str, ...] = ()  # PVC names, generic ephemeral ones included
    ready_since: datetime | None = None  # the Ready condition's lastTransitionTime
    controller_name: str = ""
    # status.startTime: set by the kubelet when it first runs the pod, and by nothing else. A tenant writes no
    # pod status (a create resets it), and the NodeRestriction admission lets a kubelet write only its own
    # node's pods: set, the node's own kubelet ran it there, alive (planner/evidence.py). The time is the
    # kubelet's clock: only whether it is set is judged.
    started_at: datetime | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_json(cls, obj: Json) -> Pod:
        meta, spec, status = obj_at(obj, "metadata"), obj_at(obj, "spec"), obj_at(obj, "status")
        controller = next((ref for ref in items_at(meta, "ownerReferences") if bool_at(ref, "controller")), {})
        ready, ready_since = ready_condition(status)
        return cls(
            namespace=text_at(meta, "namespace"), name=text_at(meta, "name"), uid=text_at(meta, "uid"),
            node=text_at(spec, "nodeName"), labels=strings_at(meta, "labels"),
            controller_kind=typed_at(controller, "kind", str, what="a string"),
            controller_name=text_at(controller, "name"),
            mirror=MIRROR_ANNOTATION in strings_at(meta, "annotations"),
            opted_out=opted_out(meta), deleting=time_at(meta, "deletionTimestamp") is not None,
            phase=typed_at(status, "phase", str, what="a string"),
            reason=typed_at(status, "reason", str, what="a string"),
            ready=ready, claims=_claim_names(text_at(meta, "name"), items_at(spec, "volumes")), ready_since=ready_since,
            started_at=time_at(status, "startTime"),
        )


def _claim_names(pod_name: str, volumes: list[Json]) -> tuple[str, ...]:
    names = []
    for vol in volumes:
        if vol.get("persistentVolumeClaim") is not None:
            names.append(text_at(obj_at(vol, "persistentVolumeClaim"), "claimName"))
        elif vol.get("ephemeral") is not None:
            obj_at(vol, "ephemeral")
            # A generic ephemeral volume's PVC is named <pod>-<volume> by the ephemeral controller.
            names.append(f"{pod_name}-{text_at(vol, 'name')}")
    return tuple(dict.fromkeys(n for n in names if n))
