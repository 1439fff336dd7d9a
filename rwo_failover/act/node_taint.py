"""Adding and removing the out-of-service taint by safe read-modify-write.

Each round patches with the resourceVersion of its read, so a stale read gets 409 and
never overwrites someone else's change; after a 409 the node is read (and judged) again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..model import OUT_OF_SERVICE_KEY, OUT_OF_SERVICE_VALUE, BadObject, Json, Taint, obj_at, text_at
from .writer import Result, Writer

log = logging.getLogger(__name__)
OUT_OF_SERVICE = {"key": OUT_OF_SERVICE_KEY, "value": OUT_OF_SERVICE_VALUE, "effect": "NoExecute"}
PATCH_ATTEMPTS = 5  # read-modify-write rounds before giving up on a node that keeps changing under us

# What a build step returns: the node as read and the merge patch to make; None to stop; or LANDED when
# the re-read shows our own earlier patch is there (its answer was lost, and the retry got 409).
LANDED = "landed"
Build = None | str | tuple[Json, dict[str, Any]]


def taints_of(raw: Json) -> list[Json]:
    return list((raw.get("spec") or {}).get("taints") or ())


def add_patch(raw: Json, stamp: str) -> dict[str, Any] | None:
    """The patch that adds our taint with timeAdded `stamp` (the time our record of it names); None when an
    out-of-service taint is already there."""
    taints = taints_of(raw)
    if any(t.get("key") == OUT_OF_SERVICE_KEY for t in taints):
        return None
    return {"metadata": {}, "spec": {"taints": taints + [dict(OUT_OF_SERVICE, timeAdded=stamp)]}}


def remove_patch(raw: Json, ours: Taint) -> dict[str, Any]:
    """Take off exactly our taint (key, value, effect and timeAdded); nothing else."""
    def is_ours(t: Json) -> bool:
        return (t.get("key"), t.get("value", ""), t.get("effect"), t.get("timeAdded") or "") == \
            (ours.key, ours.value, ours.effect, ours.time_added)
    kept = [t for t in taints_of(raw) if not is_ours(t)]
    return {"metadata": {}, "spec": {"taints": kept}}


def _version(raw: Json) -> str:
    try:
        return text_at(obj_at(raw, "metadata"), "resourceVersion")
    except BadObject:
        return ""


def read_modify_write(writer: Writer, name: str, purpose: str, *, build: Callable[[bool], Build]) -> bool:
    """Rounds of build and a preconditioned patch to `purpose`; True when a patch landed."""
    for attempt in range(PATCH_ATTEMPTS):
        built = build(attempt > 0)
        if built is None or built == LANDED:
            return built == LANDED
        assert isinstance(built, tuple)
        raw, patch = built
        version = _version(raw)
        if not version:  # an unpreconditioned patch could overwrite a change made since the read
            writer.fail(f"patching node {name} to {purpose}: the node as read holds no resourceVersion to "
                        "precondition the patch on; not patched")
            return False
        patch["metadata"]["resourceVersion"] = version
        result = writer.patch_node(name, patch, purpose)
        if result is not Result.CONFLICT:
            return result is Result.DONE
    writer.fail(f"patching node {name} to {purpose}: still conflicting after {PATCH_ATTEMPTS} "
                "read-modify-write rounds")
    return False
