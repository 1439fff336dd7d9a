"""Turning API JSON into model objects: an object that cannot be read becomes an Unreadable (a skip with its
reason), never an exception out of the pass. Lists, GETs and watch events all read through one Reader."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from .fields import BadObject, Json
from .snapshot import Unreadable

T = TypeVar("T")


class Undecodable(dict[str, Any]):
    """An object the decoder could not read (kube/decode.py): its metadata as far as it could be read (so it
    is named, and a watch resumes past it) and the reason, which the Reader turns into a skip."""

    def __init__(self, metadata: dict[str, Any], reason: str) -> None:
        super().__init__(metadata=metadata)
        self.reason = reason


# The longest namespace/name the API server accepts: a 63-character namespace, "/", a 253-character name.
MAX_KEY = 63 + 1 + 253


def name_of(raw: Any) -> str:
    """The object's namespace/name, as far as it can be read: what a skip names, and what a watch cache keys it
    by. Cut only past what the API server accepts, so two valid objects never share a key (cut at 300, three pods
    of one namespace whose names differed in their last characters were one: tests/test_recovery_reads_attack.py)."""
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(meta, dict) or not isinstance(name, str) or not name:
        return "(no name)"
    namespace = meta.get("namespace")
    return (f"{namespace}/{name}" if isinstance(namespace, str) and namespace else name)[:MAX_KEY]


class Reader:
    """Converts API JSON into model objects through their from_json. An object that cannot be read is kept
    as an Unreadable, with its reason: observe never raises for an object's content."""

    def __init__(self) -> None:
        self.unreadable: list[Unreadable] = []

    def parse(self, kind: str, from_json: Callable[[Any], T], node: str = "") -> Callable[[Any], T | None]:
        def convert(raw: Any) -> T | None:
            try:
                if isinstance(raw, Undecodable):
                    raise BadObject(raw.reason)
                if not isinstance(raw, dict):
                    raise BadObject(f"not a JSON object but {type(raw).__name__}")
                return from_json(raw)
            except BadObject as err:
                self.unreadable.append(Unreadable(kind, name_of(raw), str(err)[:300], node))
                return None
        return convert

    @staticmethod
    def each(found: Iterable[T | None]) -> list[T]:
        return [obj for obj in found if obj is not None]

    def one(self, kind: str, from_json: Callable[[Any], T], raw: Json | None, *, node: str = "") -> T | None:
        return None if raw is None else self.parse(kind, from_json, node)(raw)
