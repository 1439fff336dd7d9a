"""Reading API JSON safely: typed accessors that give a value or BadObject, RFC 3339 times, and the server's
own write stamps (managedFields). Every kind's from_json reads through these."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from .names import OPT_OUT_ANNOTATION

Json = Mapping[str, Any]


class BadObject(ValueError):
    """An object, or a field of it, without the shape the API promises: the pass skips that object, with this
    as the reason, and goes on with the others (model.reader.Reader turns it into a skip)."""


# Safe accessors: every from_json reads fields through these, so any JSON at all yields a value or BadObject.
# Absent or null means the default; a value of another JSON type is never coerced (a string is not a list of
# access modes, "false" is not a bool), because a coerced value is a guess, and a guess can make the pass act.
def typed_at(obj: Json, key: str, kind: type, *, what: str) -> Any:
    # dict, not typing.Mapping: JSON objects are dicts (obj_at accepts nothing else), and the ABC check costs
    # about 2 us a field, half the time of reading a node from a watch event (bench/intake.py).
    if not isinstance(obj, dict):
        raise BadObject(f"expected an object holding {key}, got {type(obj).__name__}")
    value = obj.get(key)
    if value is not None and (not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool)):
        raise BadObject(f"{key}: expected {what}, got {type(value).__name__}")
    return value


def obj_at(obj: Json, key: str) -> Json:
    found = typed_at(obj, key, dict, what="an object")
    return {} if found is None else found


def items_at(obj: Json, key: str) -> list[Json]:
    """A list of objects (conditions, taints, addresses...)."""
    found = typed_at(obj, key, list, what="a list") or []
    if not all(isinstance(item, dict) for item in found):
        raise BadObject(f"{key}: expected a list of objects")
    return found


def text_at(obj: Json, key: str, default: str = "") -> str:
    found = typed_at(obj, key, str, what="a string")
    return default if found is None else found


def texts_at(obj: Json, key: str) -> tuple[str, ...]:
    found = typed_at(obj, key, list, what="a list") or []
    if not all(isinstance(item, str) for item in found):
        raise BadObject(f"{key}: expected a list of strings")
    return tuple(found)


def strings_at(obj: Json, key: str) -> dict[str, str]:
    """Labels and annotations: strings to strings, as the API server keeps them."""
    found = obj_at(obj, key)
    if not all(isinstance(v, str) for v in found.values()):
        raise BadObject(f"{key}: expected strings as values")
    return dict(found)


def bool_at(obj: Json, key: str) -> bool:
    return bool(typed_at(obj, key, bool, what="true or false"))


def int_at(obj: Json, key: str, default: int, *, low: int = 0, high: int = 2**63 - 1) -> int:
    found = typed_at(obj, key, int, what="a whole number")
    if found is not None and not low <= found <= high:
        raise BadObject(f"{key}: {found} is outside [{low}, {high}]")
    return default if found is None else found


# RFC 3339 as the API server writes Time and MicroTime: a date, a time, and an explicit offset. A time without
# an offset would be read in this process's time zone, and a date alone is no time at all.
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$")


TIME_YEARS = (1900, 2999)


def parse_time(text: Any) -> datetime | None:
    """RFC 3339 (and MicroTime) to an aware UTC datetime; None and "" stay None; anything else is BadObject."""
    if text is None or text == "":
        return None
    if not isinstance(text, str) or not _RFC3339.match(text):
        raise BadObject(f"{str(text)[:40]!r} is not an RFC 3339 time")
    whole, _, rest = text.upper().replace("Z", "+00:00").partition(".")
    if rest:  # fromisoformat takes at most microseconds; MicroTime has them, but be lenient on nanoseconds
        digits, offset = rest[:-6], rest[-6:]
        whole = f"{whole}.{digits[:6].ljust(6, '0')}{offset}"
    try:
        found = datetime.fromisoformat(whole).astimezone(UTC)
    except (ValueError, OverflowError) as err:
        raise BadObject(f"{text[:40]!r} is not a valid time: {err}") from None
    # No clock that writes to a cluster runs outside these years; inside them no age or skew the pass works out
    # can overflow (year 1 or 9999, from a kubelet's clock or a forged stamp, crashed the pass before).
    if not TIME_YEARS[0] <= found.year <= TIME_YEARS[1]:
        raise BadObject(f"{text[:40]!r} is outside the years {TIME_YEARS[0]}-{TIME_YEARS[1]}")
    return found


def time_at(obj: Json, key: str) -> datetime | None:
    try:
        return parse_time(obj.get(key))
    except BadObject as err:
        raise BadObject(f"{key}: {err}") from None


# How far two readings of the API server's clock may disagree and still be one clock: the Date header and the
# server's stamps are whole seconds, truncated, taken a few milliseconds apart (kube.clock checks them against each
# other), and behind a load balancer each answer may come from another API server of the same control plane.
CLOCK_TOLERANCE_SECONDS = 2.0


def server_time(meta: Json, subresource: str | None = None) -> datetime | None:
    """When the API server last saw the object (or, given a subresource, that part of it) change: the latest
    `time` in metadata.managedFields. The server stamps it with its own clock at every write that changes
    something, so it is comparable with the server's Date header, unlike any timestamp a node writes. Whole
    seconds, truncated. None when there is none; BadObject when an entry is not what the server writes.
    `subresource=""` means writes to the object itself, not to a subresource."""
    found = []
    for entry in items_at(meta, "managedFields"):
        if subresource is not None and text_at(entry, "subresource") != subresource:
            continue
        stamped = time_at(entry, "time")
        if stamped is not None:
            found.append(stamped)
    return max(found, default=None)


def opted_out(meta: Json) -> bool:
    # Any value but "false" opts out: when in doubt, leave the object alone.
    value = strings_at(meta, "annotations").get(OPT_OUT_ANNOTATION)
    return value is not None and value.strip().lower() != "false"


def ready_condition(status: Json) -> tuple[str | None, datetime | None]:
    for cond in items_at(status, "conditions"):
        if text_at(cond, "type") == "Ready":
            return typed_at(cond, "status", str, what="a string"), time_at(cond, "lastTransitionTime")
    return None, None
