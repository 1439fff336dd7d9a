"""A VolumeAttachment: which PV it pins to which node."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .fields import Json, bool_at, obj_at, text_at, time_at


@dataclass(frozen=True)
class Attachment:
    name: str
    node: str
    volume: str  # spec.source.persistentVolumeName; "" for inline volumes
    inline: bool = False  # spec.source.inlineVolumeSpec (CSI migration): no PV to trace it to a claim
    deleting: bool = False  # deletionTimestamp set: the attacher is still detaching it
    # status.attached never decides a release (an attachment pins the volume either way); it only tells
    # recovery confirmation that the replacement's volume is really attached.
    attached: bool = False
    # metadata.creationTimestamp, stamped by the API server: whether it was made while its node was alive
    # (planner/evidence.py). None only for an object the server did not write.
    created_at: datetime | None = None
    # metadata.uid: its delete is preconditioned on it. The name is a hash of (volume, driver, node), so an
    # attachment made again after the pass judged this one has the same name; only the uid tells them apart.
    uid: str = ""

    @classmethod
    def from_json(cls, obj: Json) -> Attachment:
        meta, spec = obj_at(obj, "metadata"), obj_at(obj, "spec")
        source = obj_at(spec, "source")
        return cls(text_at(meta, "name"), text_at(spec, "nodeName"), text_at(source, "persistentVolumeName"),
                   bool(obj_at(source, "inlineVolumeSpec")), time_at(meta, "deletionTimestamp") is not None,
                   bool_at(obj_at(obj, "status"), "attached"), time_at(meta, "creationTimestamp"),
                   text_at(meta, "uid"))
