"""The value types of settings: each parser takes the text of a flag or variable and returns its value, or
raises ValueError saying what is wrong. Pure, so that the table (table.py) stays a table."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ..model.matchers import LabelSelector, MatcherError, TaintSpec
from ..model.names import DNS_LABEL, is_name
from .urls import check_url

STUCK_STATES = ("Terminating", "Unknown", "NodeLost", "NotReady", "NotStarted")
LOG_FORMATS = ("auto", "json", "text")
OUT_OF_SERVICE_MODES = ("auto", "always", "never")
FENCING_MODES = ("none", "networkfence", "webhook", "redfish")
# What proves a machine power-cycled before our taint or fence comes off (planner/undo.py).
UNDO_MODES = ("bootid", "operator", "bmc")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
OUTPUTS = ("auto", "table", "none")


def boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError()


def int_at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise ValueError("not a whole number") from None
        if value < low:
            raise ValueError("out of range")
        return value
    return parse


def int_in(low: int, high: int) -> Callable[[str], int]:
    """A whole number in [low, high]: for a setting whose extremes break what it times."""
    at_least = int_at_least(low)

    def parse(text: str) -> int:
        value = at_least(text)
        if value > high:
            raise ValueError("out of range")
        return value
    return parse


def number_in(low: float, high: float) -> Callable[[str], float]:
    """A float in the half-open range (low, high]."""
    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise ValueError("not a number") from None
        if not low < value <= high:  # also rejects nan
            raise ValueError("out of range")
        return value
    return parse


def interval_seconds(text: str) -> float:
    """0 (one pass), or seconds between passes."""
    return 0.0 if text.strip() in ("0", "0.0") else number_in(0, 86400)(text)


def choice(options: Sequence[str], fold: Callable[[str], str] = str.lower) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = fold(text.strip())
        if value not in options:
            raise ValueError()
        return value
    return parse


def comma_items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


# The node lifecycle controller puts these on every NotReady node, a partitioned one too: they say the node is
# silent, which liveness judges anyway, never that it was shut down. Accepting them would also make the
# unhealthy-fraction brake blind to a partition, since a down node with nothing to release does not count.
NOT_SHUTDOWN_EVIDENCE = ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")


def taint_specs(text: str) -> tuple[TaintSpec, ...]:
    items = comma_items(text)
    if not items:
        raise ValueError("no taint given")
    try:
        specs = tuple(TaintSpec.parse(item) for item in items)
    except MatcherError as err:
        raise ValueError(str(err)) from None
    wrong = [spec.key for spec in specs if spec.key in NOT_SHUTDOWN_EVIDENCE]
    if wrong:
        raise ValueError(f"{wrong[0]} is on every NotReady node, a partitioned one too, so it is no evidence of a "
                         "shutdown")
    return specs


def pod_states(text: str) -> frozenset[str]:
    by_fold = {state.lower(): state for state in STUCK_STATES}
    items = comma_items(text)
    unknown = [item for item in items if item.lower() not in by_fold]
    if unknown:
        raise ValueError(f"unknown state {unknown[0]!r}")
    if not items:
        raise ValueError("no state given")
    return frozenset(by_fold[item.lower()] for item in items)

def namespace_names(text: str) -> frozenset[str]:
    items = comma_items(text)
    bad = [item for item in items if not DNS_LABEL.match(item)]
    if bad:
        raise ValueError(f"{bad[0]!r} is not a namespace name")
    return frozenset(items)


def namespace_name(text: str) -> str:
    value = text.strip()
    if not DNS_LABEL.match(value):
        raise ValueError(f"{value!r} is not a namespace name")
    return value


def object_name(text: str) -> str:
    value = text.strip()
    if not is_name(value):
        raise ValueError(f"{value!r} is not an object name")
    return value


def matching(pattern: str, what: str) -> Callable[[str], str]:
    """A parser that accepts text matching `pattern` (stripped), and otherwise says it is not `what`."""
    compiled = re.compile(pattern)

    def parse(text: str) -> str:
        value = text.strip()
        if not compiled.match(value):
            raise ValueError(f"not {what}")
        return value
    return parse


def https_url(text: str) -> str:
    """TLS is always verified, with no plain-HTTP option; the token comes from FENCE_WEBHOOK_TOKEN_FILE."""
    return check_url(text, ("https",), userinfo_ok=False)


def http_url(text: str) -> str:
    return check_url(text, ("http", "https"), userinfo_ok=True)
label_value = matching(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$", "a label value")


def port_number(text: str) -> int:
    value = int_at_least(0)(text)
    if value > 65535:
        raise ValueError("out of range")
    return value


def lease_or_seconds(high: int) -> Callable[[str], int | None]:
    """None means "the node's own Lease duration"; otherwise seconds in [0, high]."""
    seconds = int_in(0, high)

    def parse(text: str) -> int | None:
        return None if text.strip().lower() == "lease" else seconds(text)
    return parse


# Safety rules that a value may switch off only when ALLOW_UNSAFE names them (checks.py says which values).
UNSAFE_RULES = ("unhealthy-fraction", "min-not-ready", "storm-cooldown", "kubelet-label")


def unsafe_rules(text: str) -> frozenset[str]:
    items = [item.lower() for item in comma_items(text)]
    unknown = [item for item in items if item not in UNSAFE_RULES]
    if unknown:
        raise ValueError(f"unknown rule {unknown[0]!r}")
    return frozenset(items)


def label_selector(text: str) -> LabelSelector:
    try:
        return LabelSelector.parse(text)
    except MatcherError as err:
        raise ValueError(str(err)) from None


_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def label_key(text: str) -> str:
    """A label key: [prefix/]name, as Kubernetes allows it."""
    value = text.strip()
    prefix, _, name = value.rpartition("/")
    if not _LABEL_NAME.fullmatch(name) or (prefix and not _DNS_SUBDOMAIN.fullmatch(prefix)) or "/" in prefix:
        raise ValueError("not a label key")
    return value


def optional_text(text: str) -> str | None:
    return text.strip() or None
