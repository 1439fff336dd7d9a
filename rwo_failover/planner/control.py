"""The operator's pause switch and the storm cool-down, both read from the control ConfigMap.

Pause: a pass that finds data.paused=true, or cannot read the control object at all, plans as usual and writes
nothing (fail safe). Storm cool-down (NHC's stormCooldownDuration): once a brake has tripped, the pass that
first finds no brake tripping starts a calm period of STORM_COOLDOWN_SECONDS, and every pass refuses until it
has passed, so a flapping partition does not release volumes at its first calm moment. A brake that trips
again during the calm period starts the storm over. The two moments are the API server's (the snapshot's
`now`), written by act into the control object; this module only says what to write.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ..model import CONTROL_NAME, Snapshot
from ..model.control import CALM_SINCE, NOT_PAUSED, TRIPPED_AT, Pause, unreadable_switch
from ..settings import Settings
from .types import Refusal, RefusalKind, StormMark


def pause_reason(snapshot: Snapshot, settings: Settings) -> Pause:
    """Why this pass may write nothing: the switch is on, or the control object cannot be read; NOT_PAUSED
    otherwise."""
    where = f"ConfigMap {settings.recovery_namespace}/{CONTROL_NAME}"
    if snapshot.control_error:
        return unreadable_switch(snapshot.control_error)
    control = snapshot.control
    if control is not None and control.paused:
        said = control.describe()
        switch = "data.paused=true" if control.switch_on else "pause requests"
        return Pause(f"paused{' ' + said if said else ''}: {switch} in {where}")
    return NOT_PAUSED


def storm(snapshot: Snapshot, settings: Settings,
          brake: Refusal | None) -> tuple[Refusal | None, StormMark | None, datetime | None]:
    """(the refusal, the mark to write, when the cool-down ends): a brake's own refusal when one tripped (marked
    once per storm), a cool-down refusal while calm for less than STORM_COOLDOWN_SECONDS."""
    if not settings.storm_cooldown_seconds:  # no cool-down: nothing to remember either
        return brake, None, None
    # Whole seconds, as written (and as the server stamps): the first calm pass names the same end as the later ones.
    control, now = snapshot.control, snapshot.now.replace(microsecond=0)
    version = control.resource_version if control else ""
    if brake is not None:
        marked = control is not None and control.tripped_at is not None and control.calm_since is None
        return brake, None if marked else StormMark(TRIPPED_AT, now, version), None
    if control is None or control.tripped_at is None:
        return None, None, None
    calm = control.calm_since
    mark = None if calm is not None else StormMark(CALM_SINCE, now, version)
    calm = calm or now
    resumes = calm + timedelta(seconds=settings.storm_cooldown_seconds)
    if now >= resumes:
        return None, None, None
    return Refusal(RefusalKind.STORM_COOLDOWN,
                   f"storm cool-down: a brake tripped at {control.tripped_at.isoformat()}, no brake has tripped since "
                   f"{calm.isoformat()}, and nothing is written until {resumes.isoformat()} (STORM_COOLDOWN_SECONDS="
                   f"{settings.storm_cooldown_seconds}, API server time)"), mark, resumes
