"""The reason of every Event rwo-failover writes, with what docs/settings.md says of it: its Events table is made
from DESCRIBED (`python -m rwo_testkit.events_table`), and tests/test_events_table.py keeps the two equal."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Reason(StrEnum):
    ForceDeletedFromDeadNode = "ForceDeletedFromDeadNode"
    VolumeReleasedFromDeadNode = "VolumeReleasedFromDeadNode"
    RWOVolumesReleased = "RWOVolumesReleased"
    PodsHeldByFinalizers = "PodsHeldByFinalizers"
    UnreadableObject = "UnreadableObject"
    ShutdownTaintOnLiveNode = "ShutdownTaintOnLiveNode"
    NodeNotJudged = "NodeNotJudged"
    FailoverRefused = "FailoverRefused"
    StormCooldown = "StormCooldown"
    NotCountedByBrakes = "NotCountedByBrakes"
    OutOfServiceTaintAdded = "OutOfServiceTaintAdded"
    OutOfServiceTaintRemoved = "OutOfServiceTaintRemoved"
    OutOfServiceTaintKept = "OutOfServiceTaintKept"
    FencingRequested = "FencingRequested"
    FencingFailed = "FencingFailed"
    NodeUnfenced = "NodeUnfenced"
    FenceLeftInPlace = "FenceLeftInPlace"
    NodePoweredOff = "NodePoweredOff"
    RWOVolumeRecovered = "RWOVolumeRecovered"
    RWOVolumeNotRecovered = "RWOVolumeNotRecovered"


@dataclass(frozen=True)
class Described:
    type: str  # Normal or Warning
    repeated: bool  # one Event per node and reason, bumped rather than re-created (act/events.py)
    on: str  # the object it is about
    when: str


DESCRIBED: dict[Reason, Described] = {
    Reason.ForceDeletedFromDeadNode: Described("Normal", False, "the pod", "the pod was force-deleted"),
    Reason.VolumeReleasedFromDeadNode: Described(
        "Normal", False, "the PVC", "its VolumeAttachment on the dead node was deleted"
    ),
    Reason.RWOVolumesReleased: Described(
        "Normal", False, "the node", "a summary of what was deleted, and the taint seen (only when something was)"
    ),
    Reason.PodsHeldByFinalizers: Described(
        "Warning", True, "the node", "a pod we force-deleted is kept by finalizers, so its volumes stay attached"
    ),
    Reason.UnreadableObject: Described(
        "Warning",
        True,
        "the node",
        "the node, its Lease or NetworkFence, or a pod on it (or that pod's claim or PV) cannot be read: "
        "the node is not judged or not acted on",
    ),
    Reason.ShutdownTaintOnLiveNode: Described(
        "Warning", True, "the node", "split-brain: tainted but Ready, or its Lease is fresh"
    ),
    Reason.NodeNotJudged: Described(
        "Warning",
        True,
        "the node",
        "it cannot be judged on the API server's clock (a stamp later than the server's now, or no stamp "
        "at all): it is never failed over until it can be ([safety.md](safety.md))",
    ),
    Reason.FailoverRefused: Described(
        "Warning", True, "each down node with work, capped at `MAX_NODES_PER_PASS`", "a brake tripped"
    ),
    Reason.StormCooldown: Described(
        "Warning",
        True,
        "each down node with work, capped at `MAX_NODES_PER_PASS`",
        "the storm cool-down holds after a brake tripped: when it ends, on the API server's clock",
    ),
    Reason.NotCountedByBrakes: Described(
        "Warning",
        True,
        "the first node it names",
        "pods on proven-down nodes with no VolumeAttachment there (any tenant can make such pods) were "
        "not counted toward the brakes: one Event a pass, its list bounded",
    ),
    Reason.OutOfServiceTaintAdded: Described("Normal", False, "the node", "we added the out-of-service taint"),
    Reason.OutOfServiceTaintRemoved: Described(
        "Normal", False, "the node", "the node is back after a reboot (another bootID), and we removed our taint"
    ),
    Reason.OutOfServiceTaintKept: Described(
        "Warning",
        True,
        "the node",
        "the node is back but its out-of-service taint stays until a human acts: it came back without "
        "rebooting, or the taint is not ours (no provenance, or recorded for another Node object) "
        "([fencing.md](fencing.md#our-out-of-service-taint))",
    ),
    Reason.FencingRequested: Described("Normal", False, "the node", "we created its NetworkFence"),
    Reason.FencingFailed: Described(
        "Warning",
        True,
        "the node",
        "fencing was not confirmed (Failed, a foreign or unreadable object, addresses that do not match, "
        "a node without an address, or the webhook did not say yes)",
    ),
    Reason.NodeUnfenced: Described(
        "Normal", False, "the node", "the node is back: unfenced, and its NetworkFence deleted"
    ),
    Reason.FenceLeftInPlace: Described(
        "Warning",
        True,
        "the node",
        "the node is back, but its NetworkFence of ours was made for another machine (another Node uid), "
        "fences other addresses than the node's, or carries no record of its machine: left in place for a "
        "human ([fencing.md](fencing.md#a-fence-left-in-place-what-a-human-does))",
    ),
    Reason.NodePoweredOff: Described(
        "Warning",
        False,
        "the node",
        "its Lease went silent and its BMC answered On: powered off through the BMC (Redfish ForceOff, "
        "`REDFISH_POWER_OFF=true`) ([fencing.md](fencing.md))",
    ),
    Reason.RWOVolumeRecovered: Described(
        "Normal", False, "the PVC", "the replacement is Running and Ready elsewhere with the volume: the failover time"
    ),
    Reason.RWOVolumeNotRecovered: Described(
        "Warning", False, "the PVC", "not confirmed within `RECOVERY_TIMEOUT_SECONDS`: what is missing"
    ),
}


def table() -> str:
    """docs/settings.md's Events table, in DESCRIBED's order."""
    lines = ["| Reason | On | When |", "|---|---|---|"]
    for reason, said in DESCRIBED.items():
        kind = f" ({said.type}{', repeated' if said.repeated else ''})" if said.type == "Warning" else ""
        lines.append(f"| `{reason}`{kind} | {said.on} | {said.when} |")
    return "\n".join(lines) + "\n"
