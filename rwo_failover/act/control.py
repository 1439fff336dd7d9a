"""The pause switch at write time, and the storm cool-down's memory, both in the control ConfigMap.

A pass read the pause switch when it started (observe); an operator may set it while the pass plans or waits, so
the write guard reads it again, live, before the pass's first write, and before every destructive write (a fence,
a power-off, a taint, a pod or attachment delete) whose last live read is PAUSE_READ_SECONDS old or more, and
(continuous mode) asks the watched copy before every write. So a pause set during a pass stops every destructive
write that starts more than PAUSE_READ_SECONDS after it, at the cost of a read per PAUSE_READ_SECONDS of writing,
not one per write (617 at 5,000 nodes before).

A storm moment is memory, not an action: it is written whatever the switch says (never in a dry run), with the
resourceVersion the pass read as its precondition (or created, which fails if someone created it first): two
writers never lose each other's word.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable

from ..kube import Api
from ..model import CONTROL_NAME
from ..model.control import CALM_SINCE, NOT_PAUSED, TRIPPED_AT, Pause, unreadable_switch
from ..observe.control import read_control
from ..planner import StormMark
from ..settings import Settings
from .writer import Guard, Result, Writer

log = logging.getLogger(__name__)
# How old the last live read of the pause switch may be when a destructive write starts (docs/operations.md).
PAUSE_READ_SECONDS = 1.0


class PauseCheck:
    """A write guard: `inner`'s reason first (a stop signal, leadership lost), then the pause switch, read live
    once before the first write, and `watched` (continuous mode's copy of the control object) before each."""

    def __init__(self, api: Api, settings: Settings, inner: Guard | None = None, *,
                 watched: Callable[[], Pause] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.api, self.settings, self.inner, self.watched, self.clock = api, settings, inner, watched, clock
        self.found = NOT_PAUSED  # why writes stopped for the pause switch; sticky for the rest of the pass
        self.read_at: float | None = None  # when the last live read was sent (this process's monotonic clock)

    def __call__(self) -> str | None:
        why = self.inner() if self.inner else None
        if why or self.found:
            return why or str(self.found)
        if self.read_at is None:
            self._read_live()
        if not self.found and self.watched:
            self.found = self.watched()
        if self.found:
            log.error("paused before a write: nothing more is written this pass", extra={"pause": str(self.found)})
        return str(self.found) or None

    def live(self) -> str | None:
        """Before each destructive write: `inner`'s reason, or the pause switch as read live at most
        PAUSE_READ_SECONDS ago (in every mode: the watched copy may lag, and a pass may have waited seconds since
        its first write for a BMC or a fence); the watched copy too, which costs nothing."""
        why = self.inner() if self.inner else None
        if why or self.found:
            return why or str(self.found)
        if self.read_at is None or self.clock() - self.read_at >= PAUSE_READ_SECONDS:
            self._read_live()
        if not self.found and self.watched:
            self.found = self.watched()
        if self.found:
            log.error("paused before a destructive write: nothing more is written this pass",
                      extra={"pause": str(self.found)})
        return str(self.found) or None

    def _read_live(self) -> None:
        # Stamped before it is sent: the answer shows the switch as it was at that moment or later.
        self.read_at = self.clock()
        control, error = read_control(self.api, self.settings)
        self.found = _reason(error, control.describe() if control and control.paused else None)


def _reason(error: str, paused_by: str | None) -> Pause:
    if error:
        return unreadable_switch(error)
    return NOT_PAUSED if paused_by is None else \
        Pause(f"paused{' ' + paused_by if paused_by else ''} (read again before a write)")


STORM_ATTEMPTS = 3  # a trip's write that loses a race is read again and retried: lost, the storm is forgotten


def record_storm(writer: Writer, settings: Settings, mark: StormMark) -> Result:
    """Write the storm moment: a storm's start removes the calm moment of the last one. A calm moment that loses a
    race is left to the next pass (which then starts the calm period later: safe). A trip that loses one is read
    again, live, and written again: if it were left, the next pass would read no storm at all and, were the
    cluster calm by then, act at its first calm moment, which is what the cool-down is for."""
    namespace = settings.recovery_namespace
    result = _write_mark(writer, namespace, mark)
    for _ in range(STORM_ATTEMPTS - 1):
        if result is not Result.CONFLICT or mark.key != TRIPPED_AT:
            break
        control, error = read_control(writer.api, settings)
        if error and control is None:  # nothing to read its version from: the next pass decides again
            break
        if control is not None and control.tripped_at is not None and control.calm_since is None:
            return Result.DONE  # someone else (another replica's pass) recorded this storm
        mark = dataclasses.replace(mark, resource_version=control.resource_version if control else "")
        result = _write_mark(writer, namespace, mark)
    if result is Result.CONFLICT:  # someone wrote it since our read: the next pass reads it and decides again
        log.warning("the control ConfigMap changed since this pass read it; the storm moment is left to the next "
                    "pass", extra={"storm": mark.key})
    return result


def _write_mark(writer: Writer, namespace: str, mark: StormMark) -> Result:
    data: dict[str, str | None] = {mark.key: mark.at.strftime("%Y-%m-%dT%H:%M:%SZ")}
    if mark.key == TRIPPED_AT:
        data[CALM_SINCE] = None
    if mark.resource_version:
        patch = {"metadata": {"resourceVersion": mark.resource_version}, "data": data}
        return writer.patch_control(namespace, CONTROL_NAME, patch)
    body = {"metadata": {"name": CONTROL_NAME, "namespace": namespace},
            "data": {k: v for k, v in data.items() if v is not None}}
    return writer.create_control(namespace, body)
