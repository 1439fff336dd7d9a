"""The control ConfigMap, read live: the pause switch and the storm cool-down's state.

Failing safe: anything but a clean answer (RBAC denies the list, the API server errs, data.paused says neither
true nor false) is an error, and a pass with an error here writes nothing. No ConfigMap at all is the normal
case: not paused, no storm remembered.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..kube import Api, ApiError
from ..model import CONTROL_NAME, BadObject, Control
from ..settings import Settings


def read_control(api: Api, settings: Settings) -> tuple[Control | None, str]:
    """(the control object or None, why it cannot be read or ""); a consistent read, never the watch cache's. A
    switch that cannot be read comes with the object: its storm memory and version can still be read and written."""
    where = f"ConfigMap {settings.recovery_namespace}/{CONTROL_NAME}"
    try:
        found = api.list_control(settings.recovery_namespace, CONTROL_NAME, lambda raw: raw, consistent=True)
    except ApiError as err:
        return None, f"{where} cannot be read: {err}"
    return control_of(found, where)


def control_of(found: Sequence[object], where: str) -> tuple[Control | None, str]:
    """The one object a name-selected list found, parsed; an error when it cannot be."""
    if not found:
        return None, ""
    try:
        if len(found) > 1 or not isinstance(found[0], dict):
            raise BadObject("the list by its name did not give one object")
        control = Control.from_json(found[0])
    except BadObject as err:
        return None, f"{where} cannot be read: {str(err)[:300]}"
    return control, f"{where} cannot be read: {control.switch_error}" if control.switch_error else ""
