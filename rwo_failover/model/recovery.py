"""A recovery record as stored: a ConfigMap in RECOVERY_NAMESPACE (parsed by planner.recovery)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .fields import Json, obj_at, text_at


@dataclass(frozen=True)
class RecoveryEntry:
    """A recovery record as stored: its ConfigMap's name and data.record (parsed by planner.recovery)."""

    name: str
    record: Any
    resource_version: str = ""

    @classmethod
    def from_json(cls, obj: Json) -> RecoveryEntry:
        meta = obj_at(obj, "metadata")
        return cls(text_at(meta, "name"), obj_at(obj, "data").get("record"), text_at(meta, "resourceVersion"))
