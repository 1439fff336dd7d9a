"""How long this process itself has seen each node's Ready=Unknown, on its own monotonic clock.

The API server's stamps time the node lifecycle controller's verdict on the clock of whichever kube-apiserver
handled that write, and "now" is the Date of whichever one answers this pass: several API servers behind a load
balancer are several clocks, and nothing checks them against each other. A stamping server 6 s behind the
answering one made a verdict 0.3 s old look 6.3 s old, and MIN_NOT_READY_SECONDS (3 s, there for a heartbeat that
crossed the verdict) came to nothing. So the wait also holds on this process's own observation: a verdict first
seen here at m is at least (now - m) old in real time, whatever any server's clock says. The node lifecycle
controller itself judges by the time it observed a change, on its own clock.

A sighting is of one verdict: the Node object (uid) with the Ready condition's lastTransitionTime it carried
when first seen Unknown. Another transition is another verdict, seen afresh. Memory is one entry per node now
Unknown: a full node list drops the rest. A watch cache that lags can only make a sighting later, never earlier.
The same memory keeps, for FENCING=redfish, how long each node's Lease has been seen at its current version.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from ..model import Lease, Node

Key = tuple[str, datetime | None]


class Sightings:
    def __init__(self, monotonic: Callable[[], float] = time.monotonic, watched_for: float = 0.0) -> None:
        """`watched_for`: seconds this process counts as having watched before its first sighting of anything
        (0 for every real process: a test double's pass that stands for one that watched long before)."""
        self.monotonic, self.watched_for = monotonic, watched_for
        self._first: dict[str, tuple[Key, float]] = {}
        self._leases: dict[str, tuple[str, float]] = {}  # node -> (its Lease's resourceVersion, first seen at it)
        self._lock = threading.Lock()

    def update(self, nodes: Iterable[Node]) -> dict[str, float]:
        """Record a full node list; the seconds each node Unknown in it has been seen Unknown here. Nodes not
        Unknown in the list are forgotten."""
        now = self.monotonic()
        with self._lock:
            kept = {}
            for node in nodes:
                if node.ready == "Unknown":
                    kept[node.name] = self._sighting(node, now)
            self._first = kept
            return {name: now - first + self.watched_for for name, (_key, first) in kept.items()}

    def age(self, node: Node) -> float:
        """The seconds this node's current Ready=Unknown has been seen here (0 when first seen now, or not
        Unknown): a live re-check's, which records it without forgetting any other node."""
        if node.ready != "Unknown":
            return 0.0
        now = self.monotonic()
        with self._lock:
            self._first[node.name] = _key, first = self._sighting(node, now)
        return now - first + self.watched_for

    def leases(self, leases: Mapping[str, Lease | None], nodes: Iterable[str]) -> dict[str, float]:
        """Record the Leases a pass read; the seconds each has been seen here at its current resourceVersion (a
        renewal is another version: seen anew). FENCING=redfish times a Lease's silence on it too, so no skew between
        API servers can make a heartbeating kubelet look silent. Nodes gone from `nodes` are forgotten."""
        now = self.monotonic()
        with self._lock:
            for name, lease in leases.items():
                self._lease_sighting(name, lease, now)
            known = set(nodes)
            self._leases = {name: seen for name, seen in self._leases.items() if name in known}
            return {name: now - self._leases[name][1] + self.watched_for for name in leases if name in self._leases}

    def lease_age(self, name: str, lease: Lease | None) -> float:
        """The seconds this Lease has been seen here at its current version, read live now (a re-check's)."""
        now = self.monotonic()
        with self._lock:
            self._lease_sighting(name, lease, now)
            return now - self._leases[name][1] + self.watched_for if name in self._leases else 0.0

    def _lease_sighting(self, name: str, lease: Lease | None, now: float) -> None:
        version = lease.version if lease is not None else ""
        found = self._leases.get(name)
        if found is None or found[0] != version:
            self._leases[name] = (version, now)

    def _sighting(self, node: Node, now: float) -> tuple[Key, float]:
        key = (node.uid, node.ready_since)
        found = self._first.get(node.name)
        return found if found is not None and found[0] == key else (key, now)
