"""Prometheus metrics: what a pass did, whether the pods it freed came back, and how long failover took.

One registry per process. Continuous mode serves it (health.py); one-shot mode pushes it to a Pushgateway
at the end of the pass. docs/monitoring.md documents every metric, and tests/test_monitoring.py keeps that
table equal to documented() below. Timestamps let alerts work the same way for scraped and pushed series.
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Callable, Iterator
from urllib.parse import unquote, urlsplit
from urllib.request import Request, build_opener

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, pushadd_to_gateway
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from ..act.outcome import Outcome
from ..kube.deadline_http import deadline_handlers
from ..model.control import NOT_PAUSED, Pause
from ..planner.fencing import HELD_REASONS
from ..planner.types import NodeState, Plan, RefusalKind
from ..settings.urls import without_userinfo
from .exitcodes import EXIT_FAILED, EXIT_OK, EXIT_REFUSED, NAMES, PAUSED
from .pushed import Carried, NotCarried, Refuse, read_back

log = logging.getLogger(__name__)
P = "rwo_failover_"
SPLIT_BRAIN = "split-brain"  # the refusals' reason for a node tainted for shutdown that still heartbeats
FAILOVER_BUCKETS = (15, 30, 45, 60, 90, 120, 180, 300, 600, 1200, 3600)
PUSH_TIMEOUT_SECONDS = 10  # the CronJob's terminationGracePeriodSeconds covers the pass deadline plus this
# "When did it last happen" gauges: a pass pushes them only when it set them, so the group keeps the time of
# the last success (refusal, not-recovered claim) from an earlier pass.
LAST_TIMES = ("last_success_timestamp_seconds", "last_refusal_timestamp_seconds",
              "last_not_recovered_timestamp_seconds")


FAILOVER = P + "failover_seconds"


class _SetThisPass(Collector):
    """The registry, less the LAST_TIMES gauges this process never set (still 0), with the failover histogram
    added to what the group held (`carried`, pushed.py)."""

    def __init__(self, registry: CollectorRegistry, carried: Carried | None = None) -> None:
        self.registry, self.carried = registry, carried

    def collect(self) -> Iterator[Metric]:
        for family in self.registry.collect():
            if family.name.removeprefix(P) in LAST_TIMES and all(s.value == 0 for s in family.samples):
                continue
            yield _added(family, self.carried) if family.name == FAILOVER and self.carried else family


def _added(family: Metric, carried: Carried) -> HistogramMetricFamily:
    """This pass's histogram plus the carried one, bucket by bucket."""
    mine = [(s.labels["le"], s.value) for s in family.samples if s.name == FAILOVER + "_bucket"]
    total = sum(s.value for s in family.samples if s.name == FAILOVER + "_sum")
    return HistogramMetricFamily(FAILOVER, family.documentation,
                                 buckets=[(le, value + carried.buckets[float(le)]) for le, value in mine],
                                 sum_value=total + carried.total)


WATCH_EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR")


class Metrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.passes = Counter(P + "passes", "Passes, by result (the exit code's name).", ["result"], registry=r)
        self.duration = Histogram(P + "pass_duration_seconds", "Wall time of a pass.", registry=r,
                                  buckets=(0.5, 1, 2.5, 5, 10, 20, 30, 45, 60, 120))
        self.last_pass = Gauge(P + "last_pass_timestamp_seconds", "When the last pass finished.", registry=r)
        self.last_success = Gauge(P + "last_success_timestamp_seconds",
                                  "When the last pass that exited 0 finished.", registry=r)
        self.last_refusal = Gauge(P + "last_refusal_timestamp_seconds",
                                  "When the last pass that refused (exit 3: a brake or split-brain) finished.",
                                  registry=r)
        self.paused = Gauge(P + "paused", "1 while the last pass was paused (the control ConfigMap's "
                            "data.paused=true): it observed and planned, wrote nothing, and exited 0.", registry=r)
        self.pause_reason = ""  # the last pass's, for /readyz's body
        self.pods = Counter(P + "pods_force_deleted", "Pods force-deleted from proven-down nodes.", registry=r)
        self.attachments = Counter(P + "attachments_deleted", "VolumeAttachments deleted.", registry=r)
        self.taints_added = Counter(P + "out_of_service_taints_added", "Out-of-service taints added.", registry=r)
        self.taints_removed = Counter(P + "out_of_service_taints_removed",
                                      "Out-of-service taints (ours) removed from recovered nodes.", registry=r)
        self.refusals = Counter(P + "refusals", "Refusals, by reason: a brake, or a split-brain node.", ["reason"],
                                registry=r)
        self.nodes = Gauge(P + "nodes", "Shutdown-tainted nodes in the last pass, by verdict.", ["verdict"],
                           registry=r)
        self.requests = Counter(P + "api_requests", "API requests, retries included, by verb, resource and status "
                                "code ('error' when no status came back).", ["verb", "resource", "code"],
                                registry=r)
        self.failover = Histogram(P + "failover_seconds", "From a node going NotReady to the replacement of a pod "
                                  "we freed Running and Ready elsewhere with its volume attached.", registry=r,
                                  buckets=FAILOVER_BUCKETS)
        self.not_recovered = Counter(P + "volumes_not_recovered", "Claims whose pod we freed but whose "
                                     "replacement was not confirmed within RECOVERY_TIMEOUT_SECONDS.", registry=r)
        self.last_not_recovered = Gauge(P + "last_not_recovered_timestamp_seconds",
                                        "When a claim was last reported not recovered.", registry=r)
        self.watch_events = Counter(P + "watch_events", "Continuous mode: watch events received, by resource and "
                                    "type (ADDED, MODIFIED, DELETED, BOOKMARK).", ["resource", "type"], registry=r)
        self.relists = Counter(P + "relists", "Continuous mode: full lists of a watched resource, by reason "
                               "(initial, expired: 410 Gone, stale: the watch went silent, no_progress: its "
                               "resourceVersion stopped keeping up with the server's, error: any other watch error, "
                               "periodic).", ["resource", "reason"], registry=r)
        self.watch_restarts = Counter(P + "watch_restarts", "Continuous mode: watches that broke and were resumed, "
                                      "by reason (dropped, stalled, short: ended within a second, expired, error, "
                                      "list failed); each waits behind one back-off.", ["resource", "reason"],
                                      registry=r)
        self.cache_age = Gauge(P + "watch_cache_age_seconds", "Continuous mode: seconds since the API server last "
                               "said anything (a list, an event, a bookmark) about a watched resource.", ["resource"],
                               registry=r)
        self.triggers = Counter(P + "pass_triggers", "Continuous mode: what started each pass (change: a watched "
                                "object changed; wake: time alone changes a verdict; interval; start).", ["reason"],
                                registry=r)
        self.fences_held = Gauge(P + "fences_left_in_place", "NetworkFences of ours on nodes back for good, left "
                                 "in place in the last pass for a human, by cause (other-machine, addresses, "
                                 "not-rebooted, no-record).", ["cause"], registry=r)
        # Every known label value starts at zero, so every pass exposes, and pushes, every series it owns: a
        # push is a POST, which replaces only the families it carries samples for, and a family left without
        # samples would keep an earlier pass's series on the Pushgateway for ever (an old refusal, say).
        # api_requests' values are open-ended; every pass that reaches the API carries some, so it is replaced.
        for state in NodeState:
            self.nodes.labels(state.value)
        for result in (*NAMES.values(), PAUSED):
            self.passes.labels(result)
        for reason in (*(kind.value for kind in RefusalKind), SPLIT_BRAIN):
            self.refusals.labels(reason)
        for cause in HELD_REASONS:
            self.fences_held.labels(cause)

    def watch_event(self, resource: str, kind: str) -> None:
        # The type comes from the server's text: only the known ones become a label value, never a new series.
        self.watch_events.labels(resource, kind if kind in WATCH_EVENT_TYPES else "other").inc()

    def relisted(self, resource: str, reason: str) -> None:
        self.relists.labels(resource, reason).inc()

    def watch_restarted(self, resource: str, reason: str) -> None:
        self.watch_restarts.labels(resource, reason).inc()

    def watch_ages(self, age: Callable[[str], float | None], resources: list[str]) -> None:
        """The cache age of each watched resource, read at scrape time (NaN before its first list)."""
        for resource in resources:
            self.cache_age.labels(resource).set_function(_age_or_nan(age, resource))

    def api_request(self, verb: str, what: str, code: str) -> None:
        self.requests.labels(verb, what.split(" ")[0], code).inc()

    def record_pass(self, plan: Plan | None, outcome: Outcome | None, code: int, *, seconds: float,
                    paused: Pause = NOT_PAUSED) -> None:
        now = time.time()
        chosen = paused.chosen  # an operator's; an unreadable switch is a failure (exit 4), not a pause
        if plan is not None:  # a pass that could not read the cluster knows nothing of the switch
            self.paused.set(1 if chosen else 0)
            self.pause_reason = str(paused)
        self.passes.labels(PAUSED if chosen and code == EXIT_OK else NAMES.get(code, str(code))).inc()
        self.duration.observe(seconds)
        self.last_pass.set(now)
        if code == EXIT_OK and not chosen:  # a paused pass exits 0 but frees nothing: no success
            self.last_success.set(now)
        if code == EXIT_REFUSED:
            self.last_refusal.set(now)
        if plan is not None:
            states = [v.state for v in plan.verdicts]
            for state in NodeState:
                self.nodes.labels(state.value).set(states.count(state))
            if plan.refusal:
                self.refusals.labels(plan.refusal.kind.value).inc()
            for cause in HELD_REASONS:
                self.fences_held.labels(cause).set(sum(1 for _, held, _ in plan.fences_held if held == cause))
        if outcome is not None:
            if outcome.split_brain:
                self.refusals.labels(SPLIT_BRAIN).inc(len(outcome.split_brain))
            self.pods.inc(len(outcome.pods_deleted))
            self.attachments.inc(len(outcome.attachments_deleted))
            self.taints_added.inc(len(outcome.taints_added))
            self.taints_removed.inc(len(outcome.taints_removed))

    def run_failed(self) -> None:
        """A one-shot run that fails after passes that did not (run/once.py): the failure is what the alerts read."""
        self.passes.labels(NAMES[EXIT_FAILED]).inc()
        self.last_pass.set(time.time())

    def recovered(self, seconds: float) -> None:
        self.failover.observe(seconds)

    def not_recovered_now(self) -> None:
        self.not_recovered.inc()
        self.last_not_recovered.set(time.time())

    def _carried(self, url: str, user: str, password: str, *, instance: str, timeout: float) -> Carried | None:
        """The failover histogram the group holds, for this push to add to (pushed.py); None to start afresh."""
        try:
            return read_back(url, user, password, instance=instance, name=FAILOVER, bounds=FAILOVER_BUCKETS,
                             timeout=timeout)
        except NotCarried as err:
            why = str(err).replace(password, "***") if password else str(err)
            log.warning("could not read the failover histogram back from the Pushgateway; this pass pushes its own "
                        "samples alone, which Prometheus reads as a counter reset", extra={"url": url, "error": why})
            return None

    def push(self, url: str, instance: str, timeout: float = PUSH_TIMEOUT_SECONDS) -> None:
        """Push this pass's metrics into the one group of this CronJob; a failure is a warning, never a failed
        pass. A POST (pushadd) replaces the metrics it carries and keeps the others, so a failed pass leaves the
        last success's time in place; every other metric is pushed by every pass and so replaced. A
        user:password@ in the URL is sent as HTTP basic auth, and never logged: only the URL without it is.
        A redirect is never followed (it would take the password to whatever host it names), and whatever the
        answer, this returns: the push comes after the pass, and must not change its exit code. The failover
        histogram is read back first (pushed.py), within half of `timeout`: read-back and push end within it."""
        ends = time.monotonic() + timeout
        grouping = {"instance": instance}
        shown = without_userinfo(url)
        parts = urlsplit(url)
        user, password = unquote(parts.username or ""), unquote(parts.password or "")
        pushed = CollectorRegistry()
        carried = self._carried(shown, user, password, instance=instance, timeout=timeout / 2)
        pushed.register(_SetThisPass(self.registry, carried))
        try:
            pushadd_to_gateway(shown, job="rwo-failover", registry=pushed, grouping_key=grouping,
                               timeout=max(ends - time.monotonic(), 0.001),
                               handler=_no_redirect_handler(user, password))
            log.info("pushed metrics to the Pushgateway", extra={"url": shown, **grouping})
        except Exception as err:
            error = f"{type(err).__name__}: {err}"
            log.warning("could not push metrics to the Pushgateway; the pass itself is unaffected",
                        extra={"url": shown, "error": error.replace(password, "***") if password else error})


def _age_or_nan(age: Callable[[str], float | None], resource: str) -> Callable[[], float]:
    def read() -> float:
        seconds = age(resource)
        return float("nan") if seconds is None else seconds
    return read


def _no_redirect_handler(user: str, password: str) -> Callable[..., Callable[[], None]]:
    """prometheus_client's handler protocol, as its default_handler (and basic_auth_handler) but with pushed.Refuse
    in place of urllib's redirect handler: that one cannot be swapped through prometheus_client's own API."""
    def handler(  # noqa: PLR0917 -- prometheus_client calls a handler with five positionals
            url: str, method: str, timeout: float | None, headers: list[tuple[str, str]],
            data: bytes) -> Callable[[], None]:
        def send() -> None:
            request = Request(url, data=data, method=method)
            for name, value in headers:
                request.add_header(name, value)
            if user or password:
                token = base64.b64encode(f"{user}:{password}".encode()).decode()
                request.add_header("Authorization", f"Basic {token}")
            # The whole answer within `timeout`, not each read: a trickling gateway held the process 22 s past it.
            ends = time.monotonic() + (timeout or PUSH_TIMEOUT_SECONDS)
            handlers = deadline_handlers(timeout or PUSH_TIMEOUT_SECONDS, lambda: ends - time.monotonic(),
                                         "no complete answer from the Pushgateway within its timeout")
            with build_opener(Refuse, *handlers).open(request, timeout=timeout) as answer:
                if answer.status >= 300:
                    raise OSError(f"the Pushgateway answered {answer.status} {answer.reason}")
        return send
    return handler


def documented() -> tuple[tuple[str, str, str], ...]:
    """The metrics as exposed: (name, type, labels). docs/monitoring.md's table must equal this."""
    return tuple((m._name + ("_total" if m._type == "counter" else ""), m._type, ",".join(m._labelnames))
                 for m in vars(Metrics()).values() if hasattr(m, "_type"))
