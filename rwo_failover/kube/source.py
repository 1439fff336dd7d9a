"""One watched collection, as a Reflector (reflector.py) lists and watches it: how to list and watch it, how to
read one of its objects, and what in an object matters to a pass; and how another thread cuts its stream."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kubernetes import watch as k8s_watch

from ..settings import Settings
from .api import Api
from .lists import Event

T = TypeVar("T")


@dataclass(frozen=True)
class Source(Generic[T]):
    """One watched collection: how to list and watch it, how to read one of its objects, and what in an object
    matters to a pass."""

    name: str  # the resource, for logs and metrics
    kind: str  # what a skip calls an object of it that cannot be read, as observe's Reader does
    list: Callable[[Api, Settings, bool, Callable[[Any], Any]], list[Any]]  # (api, settings, consistent, convert)
    watch: Callable[[Api, Settings, str, int, k8s_watch.Watch], Iterator[Event]]
    from_json: Callable[[Any], T]
    signature: Callable[[T, Settings], Hashable]  # what in an object, under these settings, matters to a pass
    shape: type  # what a pass reads of it (kube/shapes.py): lists and watch events are decoded to it
    absent: Hashable | None = None  # the signature of no object at all, when creating one may change nothing


def cut(response: Any) -> None:
    """Unblock a read of this streaming response from another thread; one already over needs nothing."""
    try:
        if response is not None:
            response.shutdown()
    except (ValueError, RuntimeError, OSError):  # urllib3: no socket left (the stream ended, the connection released)
        pass
