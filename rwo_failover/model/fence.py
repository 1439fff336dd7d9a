"""A csi-addons NetworkFence named after a node, and whether its result answers the current spec."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

from .fields import BadObject, Json, int_at, items_at, obj_at, strings_at, text_at, texts_at, time_at
from .names import FENCE_ASKED_ANNOTATION, FENCE_LABEL


@dataclass(frozen=True)
class Fence:
    """A csiaddons NetworkFence named after a node: what we asked (Fenced/Unfenced) and what it answered."""

    node: str
    ours: bool
    state: str  # spec.fenceState: "Fenced" or "Unfenced"
    result: str  # status.result: "Succeeded", "Failed", or "" while pending (or stale: see from_json)
    message: str = ""
    cidrs: tuple[str, ...] = ()  # spec.cidrs: what it fences
    deleting: bool = False  # deletionTimestamp set: a finalizer holds it
    generation: int = 0
    status: tuple[str, str] = ("", "")  # (status.result, status.message) as read, current or not

    @classmethod
    def from_json(cls, obj: Json) -> "Fence":
        """A result counts only when it answers the current spec: a condition observed this generation; or,
        from a controller that sets no observedGeneration (csi-addons sets none), the spec was never changed
        since we created it (generation 1), or the status changed since we changed the spec (our annotation).
        A Succeeded left from the previous state never counts, whatever its message says."""
        meta, spec, status = obj_at(obj, "metadata"), obj_at(obj, "spec"), obj_at(obj, "status")
        result, message = text_at(status, "result"), text_at(status, "message")
        generation = int_at(meta, "generation", 0)
        observed = [int_at(c, "observedGeneration", 0) for c in items_at(status, "conditions")]
        asked = _fence_asked(strings_at(meta, "annotations").get(FENCE_ASKED_ANNOTATION))
        if any(observed):
            current = max(observed) >= generation
        elif asked is None:
            current = generation <= 1
        else:
            current = asked[0] == generation and asked[1] != (result, message)
        return cls(text_at(meta, "name"), strings_at(meta, "labels").get(FENCE_LABEL) == "rwo-failover",
                   text_at(spec, "fenceState"), result if current else "", message, texts_at(spec, "cidrs"),
                   time_at(meta, "deletionTimestamp") is not None, generation, (result, message))


def fence_asked(generation: int, status: tuple[str, str]) -> str:
    """The FENCE_ASKED_ANNOTATION we write with a spec change: the generation it makes, and the status before."""
    return json.dumps({"generation": generation, "result": status[0], "message": status[1]}, sort_keys=True)


def _fence_asked(text: Optional[str]) -> Optional[tuple[int, tuple[str, str]]]:
    if text is None:
        return None
    try:
        found = json.loads(text)
    except ValueError:
        raise BadObject(f"annotation {FENCE_ASKED_ANNOTATION} is not JSON") from None
    if not isinstance(found, dict):
        raise BadObject(f"annotation {FENCE_ASKED_ANNOTATION} is not an object")
    return int_at(found, "generation", 0, low=1), (text_at(found, "result"), text_at(found, "message"))
