"""Continuous mode's watch of the pods on proven-down nodes: what wakes a pass when one of them changes.

On a proven-down node a change to a pod (a deletionTimestamp, a phase, an opt-out removed, the pod gone so its
attachment may go) can change what a pass does, and nothing else would wake one: the node itself no longer
changes, so the pod waited for INTERVAL (issue 25). Each proven-down node gets one field-selected watch
(`spec.nodeName`, which the API server's watch cache indexes), started after the pass that proved it down and
stopped once a pass no longer does, at most MAX_WATCHED_NODES of them. The pods are never handed to a pass: a
pass lists them live.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from ..model import Pod
from ..settings import Settings
from .api import Api
from .errors import ApiError
from .reflector import Reflector
from .sources import pods_on

log = logging.getLogger(__name__)
MAX_WATCHED_NODES = 50  # a thread and a stream each; beyond it, a pod change waits for INTERVAL (said once)


class DownNodePods:
    """One pod watch per proven-down node; each change that matters calls `on_change`, as the other watches."""

    def __init__(self, new_api: Callable[[], Api], settings: Settings, on_change: Callable[[str], None]) -> None:
        self.new_api, self.settings, self.on_change = new_api, settings, on_change
        self.reflectors: dict[str, Reflector[Pod]] = {}
        self.capped = False

    def follow(self, nodes: Iterable[str], api: Api) -> None:
        """Watch the pods on exactly these nodes (the proven-down ones of the last pass), after a list of each
        new one made with the pass's `api`. A list that fails is tried again after the next pass."""
        wanted = sorted(set(nodes))
        if len(wanted) > MAX_WATCHED_NODES and not self.capped:
            log.warning("too many proven-down nodes to watch their pods; a pod change on the others waits for the "
                        "next pass", extra={"nodes": len(wanted), "watched": MAX_WATCHED_NODES})
        self.capped = len(wanted) > MAX_WATCHED_NODES
        wanted = wanted[:MAX_WATCHED_NODES]
        for name in sorted(set(self.reflectors) - set(wanted)):
            self.reflectors.pop(name).stop()
        for name in (n for n in wanted if n not in self.reflectors):
            reflector = Reflector(pods_on(name), self.new_api, self.settings, on_change=self.on_change)
            try:
                reflector.relist("initial", api)
            except ApiError as err:
                log.warning("cannot list the pods on a proven-down node to watch them; trying after the next pass",
                            extra={"node": name, "error": str(err)})
                continue
            reflector.start()
            self.reflectors[name] = reflector

    def stop(self) -> None:
        for reflector in self.reflectors.values():
            reflector.stop()
        self.reflectors.clear()
