"""Continuous mode's view of the cluster: one Reflector per watched collection (reflector.py), started while
leading and stopped while standing by, and the view a pass reads from them. A probe thread reads the server's
current resourceVersion PROBES_PER_GRACE times per WATCH_STALE_SECONDS, and a node cache that has not reached a
version read longer ago than that is listed afresh (progress.py): judged by progress, not by traffic."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from ..model import CONTROL_NAME, Cached, Control, Node, Unreadable
from ..model.control import NOT_PAUSED, Pause, unreadable_switch
from ..settings import Settings
from .api import Api
from .errors import ApiError
from .pod_watch import DownNodePods
from .progress import at_or_past
from .reflector import Reflector
from .source import Source
from .sources import CONTROL, FENCES, NODES, RECOVERY_RECORDS, TAINT_RECORDS

log = logging.getLogger(__name__)
PROBES_PER_GRACE = 2  # at the default WATCH_STALE_SECONDS (90), a list of one node every 45 s: 1.3 requests a minute


CAUGHT_UP_SECONDS = 0.3  # how long a pass about to write waits for the node watch to reach "now", then lists


@dataclass
class WatchedCluster:
    """The reflectors of continuous mode, started while leading and stopped while standing by."""

    new_api: Callable[[], Api]
    settings: Settings
    on_change: Callable[[str], None]
    metrics: Any = None
    reflectors: dict[str, Reflector[Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        sources: list[Source[Any]] = [NODES, RECOVERY_RECORDS, TAINT_RECORDS, CONTROL]
        sources += [FENCES] if self.settings.fencing == "networkfence" else []
        self.reflectors = {s.name: Reflector(s, self.new_api, self.settings, on_change=self.on_change,
                                             metrics=self.metrics)
                           for s in sources}
        if self.metrics:
            self.metrics.watch_ages(lambda name: self.reflectors[name].age(), list(self.reflectors))
        self.running = False
        self._probe_stop = threading.Event()
        self.pods = DownNodePods(self.new_api, self.settings, self.on_change)  # pods on proven-down nodes

    def start(self) -> None:
        for reflector in self.reflectors.values():
            reflector.start()
        self._probe_stop = threading.Event()  # its own per thread, as the reflectors' (a late one just ends)
        threading.Thread(target=self._probe, args=(self._probe_stop,), name="cache-progress", daemon=True).start()
        self.running = True

    def stop(self) -> None:
        self._probe_stop.set()
        for reflector in self.reflectors.values():
            reflector.stop()
        self.pods.stop()
        self.running = False

    def _probe(self, stop: threading.Event) -> None:
        """Now and then the server's current resourceVersion, which the node cache must reach within
        WATCH_STALE_SECONDS; if it has not, it is listed afresh (the pass would list it anyway)."""
        while not stop.wait(self.settings.watch_stale_seconds / PROBES_PER_GRACE):
            nodes = self.reflectors[NODES.name]
            before = nodes.version  # the server's version, read after this, cannot be below it
            try:
                version = self.new_api().latest_node_version()
            except (ApiError, OSError) as err:  # judged below: progress that stays unknown is no progress
                log.debug("cannot read the server's resourceVersion", extra={"error": str(err)})
                version = ""
            # Nodes only: the probe is a consistent read of nodes, which on kube-apiserver (consistent reads from
            # its cache, KEP-2340) makes the nodes cache request progress from etcd, so a healthy node watch's
            # next bookmark carries the version. The other collections' caches get no such request: on a quiet
            # collection their bookmarks may advance only with etcd's periodic progress notifications (every
            # 10 minutes by default), so judging them by this version would relist them for nothing.
            if version:
                nodes.progress.probed(version, nodes.monotonic(), before)
            why = nodes.lagging()
            if why is None or stop.is_set():
                continue
            log.warning("watch cache behind; listing afresh", extra={"resource": NODES.name, "reason": why})
            try:
                nodes.relist("no_progress")
            except (ApiError, OSError) as err:
                log.warning("cannot list; the next pass lists first", extra={"resource": NODES.name,
                                                                             "error": str(err)})

    def view(self, api: Api) -> Cached:
        """For one pass: every collection current (listed afresh first when behind)."""
        found = {name: reflector.current(api) for name, reflector in self.reflectors.items()}
        control, control_error = _control(found.pop(CONTROL.name), self.settings)
        readable = {name: tuple(i for i in items if not isinstance(i, Unreadable)) for name, items in found.items()}
        return Cached(readable["nodes"], readable.get("networkfences", ()), readable["recovery records"],
                      tuple(i for items in found.values() for i in items if isinstance(i, Unreadable)),
                      control, control_error, readable["taint records"])

    def paused(self) -> Pause:
        """The watched pause switch, for the write guard: why no write may start, or NOT_PAUSED."""
        control, error = _control(list(self.reflectors[CONTROL.name].items.values()), self.settings)
        if error:
            return unreadable_switch(error)
        if control is None or not control.paused:
            return NOT_PAUSED
        said = control.describe()
        return Pause(f"paused{' ' + said if said else ''} (seen by the watch)")

    def nodes_now(self, api: Api) -> tuple[Node | Unreadable, ...] | None:
        """The nodes as of a consistent read made now, from the cache: the collection's latest version (a
        one-item quorum list), once the node watch has applied an event or bookmark at or past it (within
        CAUGHT_UP_SECONDS); None when it has not, and the caller lists. kube-apiserver serves consistent lists
        from its watch cache the same way (KEP-2340). A server whose version is below the cache's (etcd restored
        to an earlier revision) has a history the cache is not part of: None, and the caller lists."""
        reflector = self.reflectors["nodes"]
        before = reflector.version  # read before the probe is sent: the probe's version must not be below it
        version = api.latest_node_version()
        if not at_or_past(version, before):
            return None
        return reflector.current(api) if reflector.reached(version, CAUGHT_UP_SECONDS) else None

    def stuck(self) -> str | None:
        """For /healthz: a watch thread that has shown no sign of life for much longer than its read timeout
        (wedged, or dead)."""
        limit = 2 * self.settings.watch_stale_seconds + self.settings.request_timeout_seconds
        for name, reflector in self.reflectors.items():
            if self.running and reflector.monotonic() - reflector.alive_at > limit:
                return f"the {name} watch has not moved for over {limit:.0f}s"
        return None

    def behind(self) -> str | None:
        """For /readyz: a cache silent for WATCH_STALE_SECONDS, or whose resourceVersion has not kept up with
        the server's (the next pass lists afresh first)."""
        for name, reflector in self.reflectors.items():
            why = reflector.behind() if self.running and reflector.listed_at is not None else None
            if why:
                return f"the {name} watch is behind: {why}"
        return None


def _control(items: Sequence[Control | Unreadable], settings: Settings) -> tuple[Control | None, str]:
    """The watched control object, or why it cannot be read."""
    where = f"ConfigMap {settings.recovery_namespace}/{CONTROL_NAME}"
    bad = [i for i in items if isinstance(i, Unreadable)]
    if bad:
        return None, f"{where} cannot be read: {bad[0].reason}"
    control = cast(Control | None, items[0] if items else None)  # every Unreadable was returned above
    return control, f"{where} cannot be read: {control.switch_error}" if control and control.switch_error else ""
