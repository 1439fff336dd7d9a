"""A csi-addons NetworkFence named after a node, and whether its result answers the current spec."""

from __future__ import annotations

import json
from dataclasses import dataclass

from .bounded import DIGEST, MAX_ADDRESSES_NOTE, MAX_MESSAGE_NOTE, boot_id_note, note
from .fields import BadObject, Json, int_at, items_at, obj_at, strings_at, text_at, texts_at, time_at
from .names import (
    FENCE_ADDRESSES_ANNOTATION,
    FENCE_ASKED_ANNOTATION,
    FENCE_BOOT_ID_ANNOTATION,
    FENCE_LABEL,
    FENCE_NODE_UID_ANNOTATION,
    POWER_CYCLED_ANNOTATION,
)


@dataclass(frozen=True)
class Machine:
    """The machine a fence of ours was made for, as recorded on it when we created it."""

    uid: str  # the Node object's metadata.uid
    boot_id: str  # its status.nodeInfo.bootID then, as recorded (boot_id_note)
    addresses: str  # the addresses we asked to fence (spec.cidrs), as recorded (addresses_note)

    @classmethod
    def of(cls, uid: str, boot_id: str, cidrs: tuple[str, ...]) -> Machine:
        """The record for a node as read now: its uid, bootID and the CIDRs we fence for it."""
        return cls(uid, boot_id_note(boot_id), addresses_note(cidrs))

    @property
    def cidrs(self) -> tuple[str, ...]:
        """The addresses recorded one by one; none when the record is their digest."""
        return () if self.addresses.startswith(DIGEST) else tuple(self.addresses.split(","))

    def notes(self) -> dict[str, str]:
        """The annotations that record it."""
        return {FENCE_NODE_UID_ANNOTATION: self.uid, FENCE_BOOT_ID_ANNOTATION: self.boot_id,
                FENCE_ADDRESSES_ANNOTATION: self.addresses}


def addresses_note(cidrs: tuple[str, ...]) -> str:
    """CIDRs as recorded: comma-separated, or past MAX_ADDRESSES_NOTE their digest (a node reporting about 6,500
    IPv6 addresses made the plain record outgrow the API server's 256 KiB, and the fence could not be created)."""
    return note(",".join(cidrs), MAX_ADDRESSES_NOTE)


def _machine(notes: dict[str, str]) -> Machine | None:
    """The recorded machine; None when any part of the record is missing or empty (not made by us, then)."""
    uid, boot, addresses = (notes.get(k, "") for k in (FENCE_NODE_UID_ANNOTATION, FENCE_BOOT_ID_ANNOTATION,
                                                         FENCE_ADDRESSES_ANNOTATION))
    if not (uid and addresses):
        return None
    return Machine(uid, boot, addresses)


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
    uid: str = ""  # metadata.uid and resourceVersion: what every write of ours is preconditioned on
    version: str = ""
    machine: Machine | None = None  # the machine we made it for; None: no record of ours on it
    acknowledged: bool = False  # POWER_CYCLED_ANNOTATION on it: an operator's word for this outage (UNDO=operator)

    @classmethod
    def from_json(cls, obj: Json) -> Fence:
        """A result counts only when it answers the current spec: a condition observed this generation; or,
        from a controller that sets no observedGeneration (csi-addons sets none), the spec was never changed
        since we created it (generation 1), or the status changed since we changed the spec (our annotation).
        A Succeeded left from the previous state never counts, whatever its message says."""
        meta, spec, status = obj_at(obj, "metadata"), obj_at(obj, "spec"), obj_at(obj, "status")
        result, message = text_at(status, "result"), text_at(status, "message")
        generation = int_at(meta, "generation", 0)
        observed = [int_at(c, "observedGeneration", 0) for c in items_at(status, "conditions")]
        notes = strings_at(meta, "annotations")
        asked = _fence_asked(notes.get(FENCE_ASKED_ANNOTATION))
        if any(observed):
            current = max(observed) >= generation
        elif asked is None:
            current = generation <= 1
        else:
            current = asked[0] == generation and not _same_status(asked[1], (result, message))
        return cls(text_at(meta, "name"), strings_at(meta, "labels").get(FENCE_LABEL) == "rwo-failover",
                   text_at(spec, "fenceState"), result if current else "", message, texts_at(spec, "cidrs"),
                   time_at(meta, "deletionTimestamp") is not None, generation, (result, message),
                   text_at(meta, "uid"), text_at(meta, "resourceVersion"), _machine(notes),
                   notes.get(POWER_CYCLED_ANNOTATION) == "true")


def fence_asked(generation: int, status: tuple[str, str]) -> str:
    """The FENCE_ASKED_ANNOTATION we write with a spec change: the generation it makes, and the status before (its
    message past MAX_MESSAGE_NOTE by its digest: a storage controller's 300 KB message made our patch too big)."""
    return json.dumps({"generation": generation, "result": status[0],
                       "message": note(status[1], MAX_MESSAGE_NOTE)}, sort_keys=True)


def _same_status(asked: tuple[str, str], status: tuple[str, str]) -> bool:
    """Whether the status is the one recorded when we asked: the message as written or as recorded (its digest)."""
    return asked[0] == status[0] and asked[1] in (status[1], note(status[1], MAX_MESSAGE_NOTE))


def _fence_asked(text: str | None) -> tuple[int, tuple[str, str]] | None:
    if text is None:
        return None
    try:
        found = json.loads(text)
    except ValueError:
        raise BadObject(f"annotation {FENCE_ASKED_ANNOTATION} is not JSON") from None
    if not isinstance(found, dict):
        raise BadObject(f"annotation {FENCE_ASKED_ANNOTATION} is not an object")
    return int_at(found, "generation", 0, low=1), (text_at(found, "result"), text_at(found, "message"))
