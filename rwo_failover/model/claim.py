"""A PersistentVolumeClaim: which PV it names, and whether its tenant opted it out."""

from __future__ import annotations

from dataclasses import dataclass

from .fields import Json, obj_at, opted_out, text_at


@dataclass(frozen=True)
class Claim:
    namespace: str
    name: str
    uid: str
    volume: str  # spec.volumeName: the PV it names, which proves nothing until the PV names it back
    bound: bool = True  # status.phase == Bound
    opted_out: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_json(cls, obj: Json) -> Claim:
        meta, spec, status = obj_at(obj, "metadata"), obj_at(obj, "spec"), obj_at(obj, "status")
        return cls(text_at(meta, "namespace"), text_at(meta, "name"), text_at(meta, "uid"),
                   text_at(spec, "volumeName"), text_at(status, "phase") == "Bound", opted_out(meta))
