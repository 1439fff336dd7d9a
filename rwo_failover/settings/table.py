"""Settings: one table, one flag<->environment rule.

The rule is mechanical: a setting named ``MAX_NODES_PER_PASS`` is the flag ``--max-nodes-per-pass`` and the
environment variable ``MAX_NODES_PER_PASS``. Each row names its parser (values.py), default, help and what is
allowed; docs/settings.md is kept equal to this table by tests/test_docs.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..model.matchers import LabelSelector, TaintSpec
from ..model.names import CLOUD_SHUTDOWN_KEY, OUT_OF_SERVICE_KEY
from .values import (
    FENCING_MODES,
    LOG_FORMATS,
    LOG_LEVELS,
    OUT_OF_SERVICE_MODES,
    OUTPUTS,
    STUCK_STATES,
    UNDO_MODES,
    UNSAFE_RULES,
    boolean,
    choice,
    http_url,
    https_url,
    int_at_least,
    int_in,
    interval_seconds,
    label_key,
    label_selector,
    label_value,
    lease_or_seconds,
    namespace_name,
    namespace_names,
    number_in,
    object_name,
    optional_text,
    pod_states,
    port_number,
    taint_specs,
    unsafe_rules,
)


@dataclass(frozen=True)
class Settings:
    dry_run: bool
    shutdown_taints: tuple[TaintSpec, ...]
    min_not_ready_seconds: int
    max_unhealthy_fraction: float
    max_nodes_per_pass: int
    storm_cooldown_seconds: int
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
    once_wait_seconds: int
    watch: bool
    watch_stale_seconds: int
    relist_seconds: int
    fencing: str
    network_fence_class: str | None
    fence_webhook_url: str | None
    fence_webhook_token_file: str | None
    fence_webhook_ca_file: str | None
    fenced_min_not_ready_seconds: int | None
    redfish_bmc_file: str | None
    redfish_node_label: str | None
    redfish_silent_seconds: int
    redfish_power_off: bool
    redfish_off_wait_seconds: int
    undo: str
    recovery_timeout_seconds: int
    metrics_port: int
    pushgateway_url: str | None
    pushgateway_instance: str
    leader_election: bool
    leader_election_lease_seconds: int
    leader_election_namespace: str
    leader_election_lease_name: str
    recovery_namespace: str
    kubeconfig: str | None
    kube_context: str | None
    allow_unsafe: frozenset[str]


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
# Durations have a sane maximum: a larger one passed start-up, then overflowed a datetime in every pass that
# used it (exit 70), so the next outage was never freed. A day, or a week for a replacement's recovery.
_RANGE = "a whole number from {} to {}"
DAY, WEEK = 86400, 7 * 86400
SPECS: tuple[Spec, ...] = (
    Spec("DRY_RUN", boolean, "false", "Print the plan and the calls it would make; change nothing.",
         "true or false"),
    Spec("SHUTDOWN_TAINTS", taint_specs, f"{OUT_OF_SERVICE_KEY},{CLOUD_SHUTDOWN_KEY}",
         "Comma-separated taints; a node carrying any of them is a candidate.",
         "a comma-separated list of key[=value][:effect], effect one of NoSchedule, PreferNoSchedule, NoExecute; "
         "not node.kubernetes.io/unreachable nor not-ready"),
    Spec("MIN_NOT_READY_SECONDS", int_in(0, DAY), "3",
         "How long Ready=Unknown, with the Lease unrenewed for its own duration, before a node counts as down.",
         _RANGE.format(0, DAY)),
    Spec("MAX_UNHEALTHY_FRACTION", number_in(0, 1), "0.5",
         "Brake: act on nothing when more than this fraction of the nodes is not Ready (proven-down "
         "nodes with nothing to release are left out).",
         "a number in (0, 1]; 0.9 or more only with ALLOW_UNSAFE=unhealthy-fraction"),
    Spec("MAX_NODES_PER_PASS", int_at_least(1), "5",
         "Brake: act on nothing when more proven-down nodes have something to release than this "
         "(only what a tenant cannot fake counts: docs/safety.md).", _WHOLE.format(1)),
    Spec("STORM_COOLDOWN_SECONDS", int_in(0, DAY), "300",
         "After a brake (MAX_UNHEALTHY_FRACTION, MAX_NODES_PER_PASS) has tripped, keep refusing for this long once "
         "no brake trips any more, timed on the API server's clock and kept in the control ConfigMap; 0 (only with "
         "ALLOW_UNSAFE=storm-cooldown): resume at the first calm pass.", _RANGE.format(0, DAY)),
    Spec("MAX_PODS_PER_PASS", int_at_least(1), "50",
         "Cap: a pass deletes at most this many pods, taken fairly across namespaces; later passes take the rest.",
         _WHOLE.format(1)),
    Spec("STUCK_POD_STATES", pod_states, ",".join(STUCK_STATES),
         "Pod states that count as stuck: Terminating (deletionTimestamp set), Unknown (phase), "
         "NodeLost (status reason), NotReady (Ready condition False or Unknown; on a proven-down node, any started "
         "pod, whatever its dead kubelet last reported), NotStarted (Pending with no "
         "Ready condition, holding an exclusive volume attached to the node).",
         f"a non-empty comma-separated subset of {', '.join(STUCK_STATES)}"),
    Spec("INCLUDE_NAMESPACES", namespace_names, "", "Only pods in these namespaces; empty means all.",
         "a comma-separated list of namespace names, or empty", empty_ok=True),
    Spec("EXCLUDE_NAMESPACES", namespace_names, "kube-system", "Never pods in these namespaces.",
         "a comma-separated list of namespace names, or empty", empty_ok=True),
    Spec("POD_SELECTOR", label_selector, "", "Only pods matching this label selector; empty means all.",
         "a label selector such as app=db,tier in (a,b), or empty", empty_ok=True),
    Spec("OUT_OF_SERVICE_TAINT", choice(OUT_OF_SERVICE_MODES), "auto",
         "Add node.kubernetes.io/out-of-service=nodeshutdown:NoExecute to proven-down nodes: auto (when the "
         "server is 1.28 or newer), always, or never.",
         f"one of {', '.join(OUT_OF_SERVICE_MODES)}"),
    Spec("RECOVERY_SECONDS", int_in(0, DAY), "60",
         "Remove our out-of-service taint once the node, rebooted since we added it, has been Ready this long "
         "with a fresh Lease.",
         _RANGE.format(0, DAY)),
    Spec("INTERVAL", interval_seconds, "0",
         "Continuous mode: the longest time between passes (with WATCH, a watched change or the moment time "
         "alone changes a verdict starts one sooner); 0 runs one pass. --once forces one pass.",
         "0, or a number of seconds in (0, 86400]"),
    Spec("ONCE_WAIT_SECONDS", int_in(0, 3600), "30",
         "One pass (a CronJob's): when a node will be proven down within this many seconds, wait for that moment "
         "and pass again; with none due, watch nodes whose kubelet missed a Lease renewal this long for a shutdown "
         "taint, then pass again. A node held back only because this run has not yet seen it NotReady itself for the "
         "NotReady wait is waited for whatever this says. Only while PASS_TIMEOUT_SECONDS leaves the next pass a "
         "third of itself; 0 never waits otherwise.", "a whole number from 0 to 3600"),
    Spec("WATCH", boolean, "true",
         "Continuous mode: keep nodes (and our NetworkFences and recovery records) current with a watch, "
         "and pass when they change or time alone changes a verdict, at least every INTERVAL; false lists every "
         "INTERVAL instead.", "true or false"),
    Spec("WATCH_STALE_SECONDS", int_in(5, 600), "90",
         "Continuous mode: a watch silent this long (no event, no bookmark) has fallen behind; the next pass "
         "lists afresh before deciding anything. The API server bookmarks about once a minute: under 60, a quiet "
         "collection is listed again every time.", "a whole number from 5 to 600"),
    Spec("RELIST_SECONDS", int_in(30, DAY), "3600",
         "Continuous mode: list everything watched afresh this often, whatever the watch says: a backstop against "
         "a lost event.", _RANGE.format(30, DAY)),
    Spec("FENCING", choice(FENCING_MODES), "none",
         "Fence a proven-down node before touching anything on it: none, networkfence (csi-addons NetworkFence), "
         "webhook (FENCE_WEBHOOK_URL), or redfish (the node's BMC must answer PowerState Off: REDFISH_BMC_FILE).",
         f"one of {', '.join(FENCING_MODES)}"),
    Spec("NETWORK_FENCE_CLASS", lambda t: object_name(t) if t.strip() else None, "",
         "spec.networkFenceClassName of the NetworkFences we create.",
         "a NetworkFenceClass name, or empty", empty_ok=True),
    Spec("FENCE_WEBHOOK_URL", lambda t: https_url(t) if t.strip() else None, "",
         "The https:// URL that FENCING=webhook POSTs to.",
         "an https:// URL without user:password@, or empty", empty_ok=True),
    Spec("FENCE_WEBHOOK_TOKEN_FILE", optional_text, "",
         "A file whose content is sent as the webhook's bearer token; empty sends none.", "a path, or empty",
         empty_ok=True),
    Spec("FENCE_WEBHOOK_CA_FILE", optional_text, "",
         "CA bundle to verify the webhook's TLS certificate; empty uses the system's.", "a path, or empty",
         empty_ok=True),
    Spec("FENCED_MIN_NOT_READY_SECONDS", lease_or_seconds(DAY), "0",
         "With fencing, which is confirmed before anything is touched: the NotReady time that makes a node down, "
         "when shorter than MIN_NOT_READY_SECONDS; lease means the node's Lease duration. 0: down at the node "
         "lifecycle controller's verdict, once the Lease has been silent for its own duration.",
         "lease, or " + _RANGE.format(0, DAY)),
    Spec("REDFISH_BMC_FILE", optional_text, "",
         "FENCING=redfish: a JSON file (a Secret key mounted as a file) from node name, or REDFISH_NODE_LABEL value, "
         "to its BMC: {endpoint (the https:// ComputerSystem URL), username, password, uuid and/or serial (the "
         "machine's own identity, as its BMC reports it), ca (PEM, optional)}. Read again before each call; never "
         "logged.", "a path, or empty", empty_ok=True),
    Spec("REDFISH_NODE_LABEL", lambda t: label_key(t) if t.strip() else None, "",
         "FENCING=redfish: the node label whose value keys REDFISH_BMC_FILE, one no kubelet may set on its own Node "
         "(node-restriction.kubernetes.io/...); empty keys it by node name.",
         "a label key, or empty", empty_ok=True),
    Spec("REDFISH_SILENT_SECONDS", int_in(5, 3600), "20",
         "FENCING=redfish: how long a node's Lease must have gone unrenewed, on the API server's clock, before "
         "its BMC is asked for its power state (and, with REDFISH_POWER_OFF, the node is powered off); keep it well "
         "below the node-monitor grace period and above the Lease's renew interval (10 s by default).",
         _RANGE.format(5, 3600)),
    Spec("REDFISH_POWER_OFF", boolean, "false",
         "FENCING=redfish: power off (ComputerSystem.Reset ForceOff) a silent node whose BMC answers On; false "
         "only asks, and a node that is On is never acted on.", "true or false"),
    Spec("REDFISH_OFF_WAIT_SECONDS", int_in(1, 600), "30",
         "FENCING=redfish: after ForceOff, how long to wait for the BMC to report PowerState Off (never past "
         "the pass deadline, less a third of it kept for acting).", _RANGE.format(1, 600)),
    Spec("UNDO", choice(UNDO_MODES), "bootid",
         "What proves a node's machine power-cycled before our out-of-service taint or NetworkFence comes off: bootid "
         "(a new status.nodeInfo.bootID, which the node itself reports), operator (that, and an operator's "
         "rwo-failover.io/power-cycled=true annotation on our record of that outage, the taint record ConfigMap in "
         "RECOVERY_NAMESPACE or our NetworkFence, which no kubelet may write), or bmc (that, and its BMC seen Off "
         "when we acted and On now; FENCING=redfish only).",
         f"one of {', '.join(UNDO_MODES)}"),
    Spec("RECOVERY_TIMEOUT_SECONDS", int_in(1, WEEK), "600",
         "After a force-delete, how long its replacement may take to be Running and Ready elsewhere with the "
         "volume attached, before a RWOVolumeNotRecovered Warning.", _RANGE.format(1, WEEK)),
    Spec("METRICS_PORT", lambda t: port_number(t), "8080",
         "Continuous mode: serve /metrics, /healthz and /readyz on this port; 0 serves nothing.",
         "a port number in [0, 65535]"),
    Spec("PUSHGATEWAY_URL", lambda t: http_url(t) if t.strip() else None, "",
         "One-shot mode: push each pass's metrics to this Pushgateway; empty pushes nothing.",
         "an http:// or https:// URL, or empty (? # / @ in a user or password percent-encoded)", empty_ok=True),
    Spec("PUSHGATEWAY_INSTANCE", label_value, "rwo-failover",
         "The instance grouping key of the push: the CronJob's name, the same for every pass, so each pass "
         "replaces the last one's group (Pushgateway groups never expire).",
         "a label value (letters, digits, -, _ and .)"),
    Spec("LEADER_ELECTION", boolean, "false",
         "Continuous mode with several replicas: run passes only while holding the leader Lease.",
         "true or false"),
    Spec("LEADER_ELECTION_LEASE_SECONDS", int_in(3, 300), "15",
         "How long a leader's Lease lasts unrenewed before a standby takes over.", _RANGE.format(3, 300)),
    Spec("LEADER_ELECTION_NAMESPACE", namespace_name, "rwo-failover", "Namespace of the leader Lease.",
         "a namespace name"),
    Spec("LEADER_ELECTION_LEASE_NAME", object_name, "rwo-failover-leader", "Name of the leader Lease.",
         "an object name (DNS subdomain)"),
    Spec("RECOVERY_NAMESPACE", namespace_name, "rwo-failover",
         "Namespace of the recovery records: one ConfigMap per claim whose pod was force-deleted, until its "
         "recovery is confirmed. Tenants must not be able to write there.", "a namespace name"),
    Spec("PASS_TIMEOUT_SECONDS", number_in(0, 3600), "45",
         "Deadline for the whole pass, retries included; keep it below the CronJob interval.",
         "a number of seconds in (0, 3600]"),
    Spec("REQUEST_TIMEOUT_SECONDS", number_in(0, 300), "10", "Connect and read timeout of each API request.",
         "a number of seconds in (0, 300]"),
    Spec("API_MAX_ATTEMPTS", int_at_least(1), "5",
         "Attempts per API call on 429, 5xx and connection errors; 1 means no retry.", _WHOLE.format(1)),
    Spec("PAGE_SIZE", int_at_least(1), "500", "Items per page when listing nodes, pods and VolumeAttachments.",
         _WHOLE.format(1)),
    Spec("LOG_FORMAT", choice(LOG_FORMATS), "auto", "json, text, or auto (text on a TTY, else json).",
         f"one of {', '.join(LOG_FORMATS)}"),
    Spec("LOG_LEVEL", choice(LOG_LEVELS, str.upper), "INFO", "Least severe level logged.",
         f"one of {', '.join(LOG_LEVELS)}"),
    Spec("OUTPUT", choice(OUTPUTS), "auto",
         "The plan as a table before the pass acts: table, none, or auto (a table on a terminal, for one pass). "
         "On stdout at a terminal; otherwise on stderr, so stdout holds only log lines.",
         f"one of {', '.join(OUTPUTS)}"),
    Spec("KUBECONFIG", optional_text, "",
         "Kubeconfig path(s); empty means ~/.kube/config, or in-cluster config inside a pod.",
         "a path, or empty", empty_ok=True),
    Spec("KUBE_CONTEXT", optional_text, "", "Kubeconfig context; empty means the current context.",
         "a context name, or empty", empty_ok=True),
    Spec("ALLOW_UNSAFE", unsafe_rules, "",
         "Safety rules a value may switch off, each named: unhealthy-fraction (MAX_UNHEALTHY_FRACTION of 0.9 or "
         "more, the brake all but never trips), min-not-ready (MIN_NOT_READY_SECONDS=0 without FENCING), "
         "storm-cooldown (STORM_COOLDOWN_SECONDS=0, no cool-down after a brake), kubelet-label (a "
         "REDFISH_NODE_LABEL that a kubelet may set on its own Node). Without it such a value exits 2; "
         "with it, start-up warns what is off.",
         f"a comma-separated list of {', '.join(UNSAFE_RULES)}, or empty", empty_ok=True),
)

BY_NAME = {spec.name: spec for spec in SPECS}
