"""Continuous mode's view of the cluster: one Reflector per watched collection (reflector.py), started while
leading and stopped while standing by, and the view a pass reads from them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..model import Cached, Unreadable
from ..settings import Settings
from .api import Api
from .pod_watch import DownNodePods
from .reflector import Reflector
from .sources import FENCES, NODES, RECOVERY_RECORDS


CAUGHT_UP_SECONDS = 0.3  # how long a pass about to write waits for the node watch to reach "now", then lists


@dataclass
class WatchedCluster:
    """The reflectors of continuous mode, started while leading and stopped while standing by."""

    new_api: Callable[[], Api]
    settings: Settings
    on_change: Callable[[str], None]
    metrics: Any = None
    reflectors: dict[str, Reflector] = field(default_factory=dict)

    def __post_init__(self) -> None:
        sources = [NODES, RECOVERY_RECORDS] + ([FENCES] if self.settings.fencing == "networkfence" else [])
        self.reflectors = {s.name: Reflector(s, self.new_api, self.settings, self.on_change, self.metrics)
                           for s in sources}
        if self.metrics:
            self.metrics.watch_ages(lambda name: self.reflectors[name].age(), list(self.reflectors))
        self.running = False
        self.pods = DownNodePods(self.new_api, self.settings, self.on_change)  # pods on proven-down nodes

    def start(self) -> None:
        for reflector in self.reflectors.values():
            reflector.start()
        self.running = True

    def stop(self) -> None:
        for reflector in self.reflectors.values():
            reflector.stop()
        self.pods.stop()
        self.running = False

    def view(self, api: Api) -> Cached:
        """For one pass: every collection current (listed afresh first when behind)."""
        found = {name: reflector.current(api) for name, reflector in self.reflectors.items()}
        readable = {name: tuple(i for i in items if not isinstance(i, Unreadable)) for name, items in found.items()}
        return Cached(readable["nodes"], readable.get("networkfences", ()), readable["recovery records"],
                      tuple(i for items in found.values() for i in items if isinstance(i, Unreadable)))

    def nodes_now(self, api: Api) -> Optional[tuple]:
        """The nodes as of a consistent read made now, from the cache: the collection's latest version (a
        one-item quorum list), once the node watch has applied an event or bookmark at or past it (within
        CAUGHT_UP_SECONDS); None when it has not, and the caller lists. kube-apiserver serves consistent lists
        from its watch cache the same way (KEP-2340)."""
        reflector = self.reflectors["nodes"]
        version = api.latest_version("nodes", "/api/v1/nodes")
        return reflector.current(api) if reflector.reached(version, CAUGHT_UP_SECONDS) else None

    def stuck(self) -> Optional[str]:
        """For /healthz: a watch thread that has shown no sign of life for much longer than its read timeout
        (wedged, or dead)."""
        limit = 2 * self.settings.watch_stale_seconds + self.settings.request_timeout_seconds
        for name, reflector in self.reflectors.items():
            if self.running and reflector.monotonic() - reflector.alive_at > limit:
                return f"the {name} watch has not moved for over {limit:.0f}s"
        return None

    def behind(self) -> Optional[str]:
        """For /readyz: a cache older than WATCH_STALE_SECONDS (the next pass lists afresh first)."""
        for name, reflector in self.reflectors.items():
            if self.running and reflector.listed_at is not None and reflector.stale():
                return f"the {name} watch is behind: nothing heard for over {self.settings.watch_stale_seconds}s"
        return None
