"""Settings: one table, one flag<->environment rule, validated up front.

The rule is mechanical: a setting named ``MAX_NODES_PER_PASS`` is the flag
``--max-nodes-per-pass`` and the environment variable ``MAX_NODES_PER_PASS``.
A flag beats the environment, which beats the default. This module is the only
place that reads the environment, so a bad value fails before any API call.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NoReturn, Optional, Sequence
from . import __version__

from .matchers import LabelSelector, MatcherError, TaintSpec
from .model import CLOUD_SHUTDOWN_KEY, DNS_LABEL, OUT_OF_SERVICE_KEY, is_name
from .urls import check_url, without_userinfo

STUCK_STATES = ("Terminating", "Unknown", "NodeLost", "NotReady", "NotStarted")
LOG_FORMATS = ("auto", "json", "text")
OUT_OF_SERVICE_MODES = ("auto", "always", "never")
FENCING_MODES = ("none", "networkfence", "webhook")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
OUTPUTS = ("auto", "table", "none")


class ConfigError(ValueError):
    """A setting with a value we refuse; the message names the variable."""


@dataclass(frozen=True)
class Settings:
    dry_run: bool
    shutdown_taints: tuple[TaintSpec, ...]
    min_not_ready_seconds: int
    max_unhealthy_fraction: float
    max_nodes_per_pass: int
    max_pods_per_pass: int
    stuck_pod_states: frozenset[str]
    include_namespaces: frozenset[str]
    exclude_namespaces: frozenset[str]
    pod_selector: LabelSelector
    pass_timeout_seconds: float
    request_timeout_seconds: float
    api_max_attempts: int
    page_size: int
    log_format: str
    log_level: str
    output: str
    out_of_service_taint: str
    recovery_seconds: int
    interval: float
    watch: bool
    watch_stale_seconds: int
    relist_seconds: int
    fencing: str
    network_fence_class: Optional[str]
    fence_webhook_url: Optional[str]
    fence_webhook_token_file: Optional[str]
    fence_webhook_ca_file: Optional[str]
    fenced_min_not_ready_seconds: Optional[int]
    recovery_timeout_seconds: int
    metrics_port: int
    pushgateway_url: Optional[str]
    pushgateway_instance: Optional[str]
    leader_election: bool
    leader_election_lease_seconds: int
    leader_election_namespace: str
    leader_election_lease_name: str
    recovery_namespace: str
    kubeconfig: Optional[str]
    kube_context: Optional[str]


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError()


def _int_at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise ValueError("not a whole number") from None
        if value < low:
            raise ValueError("out of range")
        return value
    return parse


def _int_in(low: int, high: int) -> Callable[[str], int]:
    """A whole number in [low, high]: for a setting whose extremes break what it times."""
    at_least = _int_at_least(low)

    def parse(text: str) -> int:
        value = at_least(text)
        if value > high:
            raise ValueError("out of range")
        return value
    return parse


def _number_in(low: float, high: float) -> Callable[[str], float]:
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


def _interval(text: str) -> float:
    """0 (one pass), or seconds between passes."""
    return 0.0 if text.strip() in ("0", "0.0") else _number_in(0, 86400)(text)


def _choice(options: Sequence[str], fold: Callable[[str], str] = str.lower) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = fold(text.strip())
        if value not in options:
            raise ValueError()
        return value
    return parse


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


# The node lifecycle controller puts these on every NotReady node, a partitioned one too: they say the node is
# silent, which liveness judges anyway, never that it was shut down. Accepting them would also make the
# unhealthy-fraction brake blind to a partition, since a down node with nothing to release does not count.
NOT_SHUTDOWN_EVIDENCE = ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")


def _taints(text: str) -> tuple[TaintSpec, ...]:
    items = _items(text)
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


def _states(text: str) -> frozenset[str]:
    by_fold = {state.lower(): state for state in STUCK_STATES}
    items = _items(text)
    unknown = [item for item in items if item.lower() not in by_fold]
    if unknown:
        raise ValueError(f"unknown state {unknown[0]!r}")
    if not items:
        raise ValueError("no state given")
    return frozenset(by_fold[item.lower()] for item in items)


_DNS_LABEL = DNS_LABEL


def _namespaces(text: str) -> frozenset[str]:
    items = _items(text)
    bad = [item for item in items if not _DNS_LABEL.match(item)]
    if bad:
        raise ValueError(f"{bad[0]!r} is not a namespace name")
    return frozenset(items)


def _namespace(text: str) -> str:
    value = text.strip()
    if not _DNS_LABEL.match(value):
        raise ValueError(f"{value!r} is not a namespace name")
    return value


def _object_name(text: str) -> str:
    value = text.strip()
    if not is_name(value):
        raise ValueError(f"{value!r} is not an object name")
    return value


def _matching(pattern: str, what: str) -> Callable[[str], str]:
    """A parser that accepts text matching `pattern` (stripped), and otherwise says it is not `what`."""
    compiled = re.compile(pattern)

    def parse(text: str) -> str:
        value = text.strip()
        if not compiled.match(value):
            raise ValueError(f"not {what}")
        return value
    return parse


def _https_url(text: str) -> str:
    """TLS is always verified, with no plain-HTTP option; the token comes from FENCE_WEBHOOK_TOKEN_FILE."""
    return check_url(text, ("https",), userinfo_ok=False)


def _http_url(text: str) -> str:
    return check_url(text, ("http", "https"), userinfo_ok=True)
_label_value = _matching(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$", "a label value")


def _port(text: str) -> int:
    value = _int_at_least(0)(text)
    if value > 65535:
        raise ValueError("out of range")
    return value


def _lease_or_seconds(text: str) -> Optional[int]:
    """None means "the node's own Lease duration"."""
    return None if text.strip().lower() == "lease" else _int_at_least(0)(text)


def _selector(text: str) -> LabelSelector:
    try:
        return LabelSelector.parse(text)
    except MatcherError as err:
        raise ValueError(str(err)) from None


def _optional_text(text: str) -> Optional[str]:
    return text.strip() or None


@dataclass(frozen=True)
class Spec:
    name: str
    parse: Callable[[str], Any]
    default: str
    help: str
    allowed: str
    empty_ok: bool = False

    @property
    def flag(self) -> str:
        return "--" + self.name.lower().replace("_", "-")

    @property
    def field(self) -> str:
        return self.name.lower()


_WHOLE = "a whole number >= {}"
SPECS: tuple[Spec, ...] = (
    Spec("DRY_RUN", _bool, "false", "Print the plan and the calls it would make; change nothing.",
         "true or false"),
    Spec("SHUTDOWN_TAINTS", _taints, f"{OUT_OF_SERVICE_KEY},{CLOUD_SHUTDOWN_KEY}",
         "Comma-separated taints; a node carrying any of them is a candidate.",
         "a comma-separated list of key[=value][:effect], effect one of NoSchedule, PreferNoSchedule, NoExecute; "
         "not node.kubernetes.io/unreachable nor not-ready"),
    Spec("MIN_NOT_READY_SECONDS", _int_at_least(0), "60",
         "How long Ready must have been not True, and the Lease unrenewed, before a node counts as down.",
         _WHOLE.format(0)),
    Spec("MAX_UNHEALTHY_FRACTION", _number_in(0, 1), "0.5",
         "Brake: act on nothing when more than this fraction of all nodes is not Ready.",
         "a number in (0, 1]"),
    Spec("MAX_NODES_PER_PASS", _int_at_least(1), "5",
         "Brake: act on nothing when more nodes than this are proven down.", _WHOLE.format(1)),
    Spec("MAX_PODS_PER_PASS", _int_at_least(1), "50",
         "Cap: a pass deletes at most this many pods, taken fairly across namespaces; later passes take the rest.",
         _WHOLE.format(1)),
    Spec("STUCK_POD_STATES", _states, ",".join(STUCK_STATES),
         "Pod states that count as stuck: Terminating (deletionTimestamp set), Unknown (phase), "
         "NodeLost (status reason), NotReady (Ready condition False or Unknown), NotStarted (Pending with no "
         "Ready condition, holding an exclusive volume attached to the node).",
         f"a non-empty comma-separated subset of {', '.join(STUCK_STATES)}"),
    Spec("INCLUDE_NAMESPACES", _namespaces, "", "Only pods in these namespaces; empty means all.",
         "a comma-separated list of namespace names, or empty", empty_ok=True),
    Spec("EXCLUDE_NAMESPACES", _namespaces, "kube-system", "Never pods in these namespaces.",
         "a comma-separated list of namespace names, or empty", empty_ok=True),
    Spec("POD_SELECTOR", _selector, "", "Only pods matching this label selector; empty means all.",
         "a label selector such as app=db,tier in (a,b), or empty", empty_ok=True),
    Spec("OUT_OF_SERVICE_TAINT", _choice(OUT_OF_SERVICE_MODES), "auto",
         "Add node.kubernetes.io/out-of-service=nodeshutdown:NoExecute to proven-down nodes: auto (when the "
         "server is 1.28 or newer), always, or never.",
         f"one of {', '.join(OUT_OF_SERVICE_MODES)}"),
    Spec("RECOVERY_SECONDS", _int_at_least(0), "60",
         "Remove our out-of-service taint once the node has been Ready this long with a fresh Lease.",
         _WHOLE.format(0)),
    Spec("INTERVAL", _interval, "0",
         "Continuous mode: the longest time between passes (with WATCH, a watched change or the moment time "
         "alone changes a verdict starts one sooner); 0 runs one pass. --once forces one pass.",
         "0, or a number of seconds in (0, 86400]"),
    Spec("WATCH", _bool, "true",
         "Continuous mode: keep nodes (and our NetworkFences and recovery records) current with a watch, "
         "and pass when they change or time alone changes a verdict, at least every INTERVAL; false lists every "
         "INTERVAL instead.", "true or false"),
    Spec("WATCH_STALE_SECONDS", _int_in(5, 600), "90",
         "Continuous mode: a watch silent this long (no event, no bookmark) has fallen behind; the next pass "
         "lists afresh before deciding anything. The API server bookmarks about once a minute: under 60, a quiet "
         "collection is listed again every time.", "a whole number from 5 to 600"),
    Spec("RELIST_SECONDS", _int_at_least(30), "3600",
         "Continuous mode: list everything watched afresh this often, whatever the watch says: a backstop against "
         "a lost event.", _WHOLE.format(30)),
    Spec("FENCING", _choice(FENCING_MODES), "none",
         "Fence a proven-down node before touching anything on it: none, networkfence (csi-addons NetworkFence), "
         "or webhook (FENCE_WEBHOOK_URL).", f"one of {', '.join(FENCING_MODES)}"),
    Spec("NETWORK_FENCE_CLASS", lambda t: _object_name(t) if t.strip() else None, "", "spec.networkFenceClassName of the NetworkFences we create.",
         "a NetworkFenceClass name, or empty", empty_ok=True),
    Spec("FENCE_WEBHOOK_URL", lambda t: _https_url(t) if t.strip() else None, "", "The https:// URL that FENCING=webhook POSTs to.",
         "an https:// URL without user:password@, or empty", empty_ok=True),
    Spec("FENCE_WEBHOOK_TOKEN_FILE", _optional_text, "",
         "A file whose content is sent as the webhook's bearer token; empty sends none.", "a path, or empty",
         empty_ok=True),
    Spec("FENCE_WEBHOOK_CA_FILE", _optional_text, "",
         "CA bundle to verify the webhook's TLS certificate; empty uses the system's.", "a path, or empty",
         empty_ok=True),
    Spec("FENCED_MIN_NOT_READY_SECONDS", _lease_or_seconds, "0",
         "With fencing, which is confirmed before anything is touched: the NotReady time that makes a node down, "
         "when shorter than MIN_NOT_READY_SECONDS; lease means the node's Lease duration. 0: down at the node "
         "lifecycle controller's verdict, once the Lease has been silent for its own duration.",
         "lease, or " + _WHOLE.format(0)),
    Spec("RECOVERY_TIMEOUT_SECONDS", _int_at_least(1), "600",
         "After a force-delete, how long its replacement may take to be Running and Ready elsewhere with the "
         "volume attached, before a RWOVolumeNotRecovered Warning.", _WHOLE.format(1)),
    Spec("METRICS_PORT", lambda t: _port(t), "8080",
         "Continuous mode: serve /metrics, /healthz and /readyz on this port; 0 serves nothing.",
         "a port number in [0, 65535]"),
    Spec("PUSHGATEWAY_URL", lambda t: _http_url(t) if t.strip() else None, "",
         "One-shot mode: push each pass's metrics to this Pushgateway; empty pushes nothing.",
         "an http:// or https:// URL, or empty (? # / @ in a user or password percent-encoded)", empty_ok=True),
    Spec("PUSHGATEWAY_INSTANCE", _label_value, "rwo-failover",
         "The instance grouping key of the push: the CronJob's name, the same for every pass, so each pass "
         "replaces the last one's group (Pushgateway groups never expire).",
         "a label value (letters, digits, -, _ and .)"),
    Spec("LEADER_ELECTION", _bool, "false",
         "Continuous mode with several replicas: run passes only while holding the leader Lease.",
         "true or false"),
    Spec("LEADER_ELECTION_LEASE_SECONDS", _int_at_least(3), "15",
         "How long a leader's Lease lasts unrenewed before a standby takes over.", _WHOLE.format(3)),
    Spec("LEADER_ELECTION_NAMESPACE", _namespace, "rwo-failover", "Namespace of the leader Lease.",
         "a namespace name"),
    Spec("LEADER_ELECTION_LEASE_NAME", _object_name, "rwo-failover-leader", "Name of the leader Lease.",
         "an object name (DNS subdomain)"),
    Spec("RECOVERY_NAMESPACE", _namespace, "rwo-failover",
         "Namespace of the recovery records: one ConfigMap per claim whose pod was force-deleted, until its "
         "recovery is confirmed. Tenants must not be able to write there.", "a namespace name"),
    Spec("PASS_TIMEOUT_SECONDS", _number_in(0, 3600), "45",
         "Deadline for the whole pass, retries included; keep it below the CronJob interval.",
         "a number of seconds in (0, 3600]"),
    Spec("REQUEST_TIMEOUT_SECONDS", _number_in(0, 300), "10", "Connect and read timeout of each API request.",
         "a number of seconds in (0, 300]"),
    Spec("API_MAX_ATTEMPTS", _int_at_least(1), "5",
         "Attempts per API call on 429, 5xx and connection errors; 1 means no retry.", _WHOLE.format(1)),
    Spec("PAGE_SIZE", _int_at_least(1), "500", "Items per page when listing nodes, pods and VolumeAttachments.",
         _WHOLE.format(1)),
    Spec("LOG_FORMAT", _choice(LOG_FORMATS), "auto", "json, text, or auto (text on a TTY, else json).",
         f"one of {', '.join(LOG_FORMATS)}"),
    Spec("LOG_LEVEL", _choice(LOG_LEVELS, str.upper), "INFO", "Least severe level logged.",
         f"one of {', '.join(LOG_LEVELS)}"),
    Spec("OUTPUT", _choice(OUTPUTS), "auto",
         "The plan as a table before the pass acts: table, none, or auto (a table on a terminal, for one pass). "
         "On stdout at a terminal; otherwise on stderr, so stdout holds only log lines.",
         f"one of {', '.join(OUTPUTS)}"),
    Spec("KUBECONFIG", _optional_text, "",
         "Kubeconfig path(s); empty means ~/.kube/config, or in-cluster config inside a pod.",
         "a path, or empty", empty_ok=True),
    Spec("KUBE_CONTEXT", _optional_text, "", "Kubeconfig context; empty means the current context.",
         "a context name, or empty", empty_ok=True),
)

BY_NAME = {spec.name: spec for spec in SPECS}


class _Parser(argparse.ArgumentParser):
    """argparse, except that a bad argument is a ConfigError: one line, the same prefix and exit code as a bad
    setting, instead of the usage text and argparse's own exit."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{message}; see {self.prog} --help")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rwo-failover",
        description="Release ReadWriteOnce volumes held by pods on nodes that are proven down.",
        epilog="Every setting is also an environment variable: --max-nodes-per-pass is MAX_NODES_PER_PASS. "
               "A true/false setting's flag alone means true (--dry-run); --dry-run=false also works.",
        allow_abbrev=False,  # a typo must never silently mean another flag
    )
    parser.add_argument("--once", action="store_true", help="Run one pass and exit, whatever INTERVAL says.")
    parser.add_argument("--version", action="version", version=f"rwo-failover {__version__}")
    for spec in SPECS:
        # A boolean works bare, as kubectl's flags do; a value, when given, is parsed like the env var's.
        bare = {"nargs": "?", "const": "true"} if spec.parse is _bool else {}
        parser.add_argument(spec.flag, dest=spec.field, metavar=spec.name, default=None,
                            help=f"{spec.help} (default: {spec.default!r})", **bare)
    return parser


def _resolve(spec: Spec, flag_value: Optional[str], environ: Mapping[str, str]) -> Any:
    source, raw = (spec.flag, flag_value) if flag_value is not None else (spec.name, environ.get(spec.name))
    if raw is None:
        return spec.parse(spec.default)
    if not raw.strip() and not spec.empty_ok:
        raise ConfigError(f"{source}: empty value is invalid; allowed: {spec.allowed}")
    try:
        return spec.parse(raw)
    except ValueError as err:
        detail = f" ({err})" if str(err) else ""
        shown = without_userinfo(raw) if spec.name.endswith("_URL") else raw  # a password is never echoed
        raise ConfigError(f"{source}={shown!r} is invalid{detail}; allowed: {spec.allowed}") from None


def load(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[argparse.Namespace, Settings]:
    """Parse flags and environment into Settings; raise ConfigError on any bad value."""
    args = build_parser().parse_args(list(argv))
    values = {spec.field: _resolve(spec, getattr(args, spec.field), environ) for spec in SPECS}
    settings = Settings(**values)
    _check_consistent(settings)
    _check_fencing(settings)
    if settings.leader_election and (args.once or not settings.interval):
        raise ConfigError("LEADER_ELECTION=true needs continuous mode; allowed: INTERVAL > 0 without --once")
    if settings.leader_election and settings.dry_run:
        # The Lease is the one write a dry run would still make, and a dry-run replica that takes it
        # switches failover off for the real one, silently.
        raise ConfigError("DRY_RUN=true with LEADER_ELECTION=true would let a replica that changes nothing hold "
                          "the leader Lease; allowed: one of them, not both")
    return args, settings


def _check_consistent(settings: Settings) -> None:
    both = settings.include_namespaces & settings.exclude_namespaces
    if both:
        raise ConfigError(
            f"INCLUDE_NAMESPACES and EXCLUDE_NAMESPACES both name {', '.join(sorted(both))}; "
            "allowed: disjoint lists")
    if settings.leader_election and settings.leader_election_lease_seconds <= settings.request_timeout_seconds + 2:
        raise ConfigError(
            f"LEADER_ELECTION_LEASE_SECONDS={settings.leader_election_lease_seconds} leaves no time to write: a "
            f"leader starts a write only while its Lease outlives REQUEST_TIMEOUT_SECONDS="
            f"{settings.request_timeout_seconds:g} plus a second; allowed: a lease longer than the request "
            "timeout + 2 s")
    if settings.request_timeout_seconds > settings.pass_timeout_seconds:
        raise ConfigError(
            f"REQUEST_TIMEOUT_SECONDS={settings.request_timeout_seconds:g} exceeds "
            f"PASS_TIMEOUT_SECONDS={settings.pass_timeout_seconds:g}; allowed: a request timeout <= the pass timeout")


def _check_fencing(settings: Settings) -> None:
    if settings.fencing == "networkfence" and not settings.network_fence_class:
        raise ConfigError("FENCING=networkfence needs NETWORK_FENCE_CLASS; allowed: a NetworkFenceClass name")
    if settings.fencing == "webhook" and not settings.fence_webhook_url:
        raise ConfigError("FENCING=webhook needs FENCE_WEBHOOK_URL; allowed: an https:// URL")
    if settings.fence_webhook_ca_file:
        try:
            with open(settings.fence_webhook_ca_file, "rb"):
                pass
        except OSError as err:
            raise ConfigError(f"FENCE_WEBHOOK_CA_FILE={settings.fence_webhook_ca_file!r} is invalid "
                              f"({err.strerror}); allowed: a readable file") from None
    if settings.fence_webhook_token_file:
        try:
            read_bearer_token(settings.fence_webhook_token_file)
        except TokenError as err:
            raise ConfigError(f"FENCE_WEBHOOK_TOKEN_FILE={settings.fence_webhook_token_file!r} is invalid ({err}); "
                              f"allowed: {TOKEN_ALLOWED}") from None


class TokenError(ValueError):
    """A token file that cannot be sent; the message says what is wrong with it, and never holds its content."""


TOKEN_ALLOWED = "a readable file holding one bearer token on one line"
MAX_TOKEN_BYTES = 16384
_B64TOKEN = re.compile(r"[A-Za-z0-9._~+/-]+=*")  # RFC 6750's b64token: all a Bearer credential may hold


def read_bearer_token(path: str) -> str:
    """The bearer token in the file at `path`; TokenError naming what keeps it from being sent. Read at start-up
    (exit 2) and before each webhook call (a rotated file is picked up; a bad one is a failed fence). No message
    ever quotes the file: whatever it holds may be the token."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_TOKEN_BYTES + 1)
    except OSError as err:
        raise TokenError(err.strerror or type(err).__name__) from None
    if len(raw) > MAX_TOKEN_BYTES:
        raise TokenError(f"it is longer than {MAX_TOKEN_BYTES} bytes")
    try:
        token = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        raise TokenError("it is not ASCII text") from None
    if not token:
        raise TokenError("it is empty")
    if "\n" in token or "\r" in token:
        raise TokenError("it holds more than one line")
    if not _B64TOKEN.fullmatch(token):
        raise TokenError("it holds a character a bearer token cannot hold (RFC 6750: letters, digits, "
                         "- . _ ~ + / and a trailing =)")
    return token
