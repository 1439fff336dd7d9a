"""The machine our NetworkFence names (its boot annotation), written again at each outage through the fence: undo
lifts a fence only after a reboot since the last release through it (planner/undo.py), and an operator's word
given before that release does not carry over."""

from __future__ import annotations

import logging

from ..model import POWER_CYCLED_ANNOTATION, Fence, Node, boot_id_note
from ..model.names import FENCE_BOOT_ID_ANNOTATION
from .writer import Result, Writer

log = logging.getLogger(__name__)


def record_machine(writer: Writer, name: str, *, boot: str, version: str) -> Result:
    """Our fence names the machine as it is now (planner.taint.fences_now), without an earlier operator's word;
    preconditioned on the version the plan read. Through `writer`: the pass's memory, as our taint's record."""
    result = _write_machine(writer, name, boot=boot, version=version, purpose="record the machine under our fence")
    if result is Result.CONFLICT:
        log.warning("NetworkFence changed since it was read; the next pass records the machine", extra={"node": name})
    return result


def at_this_release(writer: Writer, node: Node, fence: Fence) -> bool:
    """A fence of an earlier outage still stands and this pass releases through it: the machine recorded on it
    becomes the machine as it is now (its bootID). True once it says so."""
    boot = boot_id_note(node.boot_id)
    if fence.machine is None or (fence.machine.boot_id == boot and not fence.acknowledged):
        return True
    result = _write_machine(writer, node.name, boot=boot, version=fence.version,
                            purpose="record the machine at this release")
    if result is Result.CONFLICT:
        writer.fail(f"NetworkFence {node.name} changed since it was read; nothing on the node is released in this "
                    "pass")
    return result in (Result.DONE, Result.WOULD)


def _write_machine(writer: Writer, name: str, *, boot: str, version: str, purpose: str) -> Result:
    """The fence's boot annotation set to `boot` and an operator's word taken off, preconditioned on `version`."""
    patch = {"metadata": {"resourceVersion": version,
                          "annotations": {FENCE_BOOT_ID_ANNOTATION: boot, POWER_CYCLED_ANNOTATION: None}}}
    return writer.patch_networkfence(name, patch, purpose)
