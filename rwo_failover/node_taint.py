"""Adding and removing the out-of-service taint by safe read-modify-write.

Each round patches with the resourceVersion of its read, so a stale read gets 409 and
never overwrites someone else's change; after a 409 the node is read (and judged) again.
"""

from __future__ import annotations

import logging
from typing import Callable, Optional

from .model import OOS_ANNOTATION, OUT_OF_SERVICE_KEY, OUT_OF_SERVICE_VALUE
from .writer import Result, Writer

log = logging.getLogger("rwo_failover")
OUT_OF_SERVICE = {"key": OUT_OF_SERVICE_KEY, "value": OUT_OF_SERVICE_VALUE, "effect": "NoExecute"}
PATCH_ATTEMPTS = 5  # read-modify-write rounds before giving up on a node that keeps changing under us

# Given whether this is a re-read after a 409: the node as read, and the merge patch to make; None to stop.
Build = Callable[[bool], Optional[tuple[dict, dict]]]


def taints_of(raw: dict) -> list[dict]:
    return list((raw.get("spec") or {}).get("taints") or ())


def add_patch(raw: dict, stamp: str) -> Optional[dict]:
    """The patch that adds our taint and annotation; None when an out-of-service taint is already there."""
    taints = taints_of(raw)
    if any(t.get("key") == OUT_OF_SERVICE_KEY for t in taints):
        return None
    return {"metadata": {"annotations": {OOS_ANNOTATION: stamp}},
            "spec": {"taints": taints + [dict(OUT_OF_SERVICE, timeAdded=stamp)]}}


def remove_patch(raw: dict) -> dict:
    kept = [t for t in taints_of(raw) if t.get("key") != OUT_OF_SERVICE_KEY]
    return {"metadata": {"annotations": {OOS_ANNOTATION: None}}, "spec": {"taints": kept}}


def read_modify_write(writer: Writer, name: str, purpose: str, build: Build) -> bool:
    """Rounds of build and a preconditioned patch to `purpose`; True when a patch landed."""
    for attempt in range(PATCH_ATTEMPTS):
        built = build(attempt > 0)
        if built is None:
            return False
        raw, patch = built
        patch["metadata"]["resourceVersion"] = raw["metadata"]["resourceVersion"]
        result = writer.patch_node(name, patch, purpose)
        if result is not Result.CONFLICT:
            return result is Result.DONE
    writer.fail(f"patching node {name} to {purpose}: still conflicting after {PATCH_ATTEMPTS} "
                "read-modify-write rounds")
    return False
