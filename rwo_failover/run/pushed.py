"""CronJob mode's failover histogram, carried from pass to pass through its Pushgateway group.

Each CronJob pass is a new process that pushes into one group (metrics.py), and a push replaces the families it
carries. For most metrics that is the point (each pass's own figures; alerts compare timestamps), but a
histogram is a set of counters that rate() and histogram_quantile() read: two passes in a row that each confirm
one recovery would push 1 and then 1, which Prometheus reads as no recovery at all. So before its push a pass
reads the group's histogram back (the Pushgateway's /api/v1/metrics) and pushes that plus its own samples. A
read-back that fails or does not hold up (another shape, other buckets, counts that fall as le grows) is a
warning, and the pass pushes its own samples alone: a counter reset, which rate() handles.
"""

from __future__ import annotations

import base64
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from email.message import Message
from typing import IO, Any
from urllib.error import HTTPError
from urllib.request import HTTPRedirectHandler, Request, build_opener

from ..kube.deadline_http import deadline_handlers
from ..settings.urls import without_userinfo

MAX_ANSWER_BYTES = 8 * 1024 * 1024  # every group on the gateway comes back; ours is a few KiB of it
# Parsed, each JSON value is a Python object of 50 to 100 bytes: 8 MiB of "{}," would be 2.8 million of them, over
# 200 MiB against the CronJob's 256Mi limit. A real gateway's answer holds about 51,000 per MiB (measured: 20
# groups of ours, 8.5 KB each), so this bound, counted before parsing (commas and openings, an upper bound on the
# values), lets a full 8 MiB real answer through and keeps a hostile one near 45 MiB.
MAX_JSON_VALUES = 600_000
JOB = "rwo-failover"


class Refuse(HTTPRedirectHandler):
    """A 3xx is an error like any other: urllib would otherwise repeat the request (as a GET for 301, 302 and
    303) at the Location it names, with every header, the Authorization one included."""

    def redirect_request(  # noqa: PLR0917 -- urllib's HTTPRedirectHandler calls it with six positionals
            self, req: Request, fp: IO[bytes], code: int, msg: str, headers: Message, newurl: str) -> None:
        raise HTTPError(req.full_url, code, f"{msg}: a redirect to {without_userinfo(newurl)!r}, which a push never "
                        "follows", headers, fp)


@dataclass(frozen=True)
class Carried:
    """A histogram as the group holds it: cumulative count per upper bound (math.inf last), and the sum."""

    buckets: dict[float, float]
    total: float


class NotCarried(ValueError):
    """The read-back failed, or its answer does not hold up."""


def read_back(url: str, user: str, password: str, *, instance: str, name: str, bounds: Sequence[float],
              timeout: float) -> Carried | None:
    """The group's histogram `name`; None when the group or the histogram is not there yet (the first push).
    NotCarried when it cannot be read or does not hold up. `url` is without user:password@."""
    request = Request(url.rstrip("/") + "/api/v1/metrics")
    if user or password:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    ends = time.monotonic() + timeout
    handlers = deadline_handlers(timeout, lambda: ends - time.monotonic(),
                                 "no complete answer from the Pushgateway within its timeout")
    try:
        with build_opener(Refuse, *handlers).open(request, timeout=timeout) as answer:
            body = answer.read(MAX_ANSWER_BYTES + 1)
    except Exception as err:
        raise NotCarried(f"{type(err).__name__}: {err}") from None
    if len(body) > MAX_ANSWER_BYTES:
        raise NotCarried(f"the answer is over {MAX_ANSWER_BYTES} bytes")
    values = body.count(b",") + body.count(b"[") + body.count(b"{")
    if values > MAX_JSON_VALUES:
        raise NotCarried(f"the answer holds over {MAX_JSON_VALUES} JSON values")
    try:
        found = json.loads(body)
    except (ValueError, RecursionError) as err:
        raise NotCarried(f"the answer is not JSON: {str(err)[:100]}") from None
    return _histogram(found, instance, name, bounds=bounds)


def _histogram(found: Any, instance: str, name: str, *, bounds: Sequence[float]) -> Carried | None:
    groups = found.get("data") if isinstance(found, dict) else None
    if not isinstance(groups, list):
        raise NotCarried("the answer has no list of groups")
    ours = [g for g in groups if isinstance(g, dict) and g.get("labels") == {"job": JOB, "instance": instance}]
    family = ours[0].get(name) if ours else None
    if family is None:
        return None
    metrics = family.get("metrics") if isinstance(family, dict) else None
    if not isinstance(metrics, list) or len(metrics) != 1 or not isinstance(metrics[0], dict):
        raise NotCarried(f"{name} is not one histogram")
    metric = metrics[0]
    raw = metric.get("buckets")
    if not isinstance(raw, dict):
        raise NotCarried(f"{name} has no buckets")
    buckets = {_number(le, "le"): _number(count, "a bucket") for le, count in raw.items()}
    if sorted(buckets) != sorted([*map(float, bounds), math.inf]):
        raise NotCarried(f"{name} has other buckets than ours: {sorted(buckets)[:20]}")
    counts = [buckets[le] for le in sorted(buckets)]
    if counts != sorted(counts) or counts[-1] != _number(metric.get("count"), "count"):
        raise NotCarried(f"{name}'s buckets are not cumulative, or do not end at its count")
    return Carried(dict(sorted(buckets.items())), _number(metric.get("sum"), "sum"))


def _number(text: Any, what: str) -> float:
    """A count, a sum or a bound as the Pushgateway writes it: a finite number >= 0 (or +Inf for a bound)."""
    try:
        value = float(text) if isinstance(text, str) else math.nan
    except ValueError:
        value = math.nan
    if math.isnan(value) or value < 0 or (math.isinf(value) and what != "le"):
        raise NotCarried(f"{what} {str(text)[:40]!r} is not a finite number >= 0")
    return value
