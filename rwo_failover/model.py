"""The slim, immutable view of cluster objects that a pass works on.

Observe turns raw API JSON into these, keeping only the fields the rules use,
so a 5,000-node list does not stay in memory as full objects.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Mapping, Optional

OPT_OUT_ANNOTATION = "rwo-failover.io/opt-out"
# Set by us when we add the out-of-service taint; it records when, so the taint can be proven ours.
OOS_ANNOTATION = "rwo-failover.io/out-of-service-added-at"
# The one name for the out-of-service taint key across the code.
OUT_OF_SERVICE_KEY = "node.kubernetes.io/out-of-service"
OUT_OF_SERVICE_VALUE = "nodeshutdown"
CLOUD_SHUTDOWN_KEY = "node.cloudprovider.kubernetes.io/shutdown"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# The attach-detach controller allows a volume on several nodes when its PV lists either of these;
# otherwise a second attachment fails with Multi-Attach. That is what "exclusive" means here.
MULTI_ATTACH_MODES = frozenset({"ReadWriteMany", "ReadOnlyMany"})
DEFAULT_LEASE_SECONDS = 40  # the kubelet's node lease duration when the Lease does not say

Json = Mapping[str, Any]


class BadObject(ValueError):
    """An object, or a field of it, without the shape the API promises: the pass skips that object, with this
    as the reason, and goes on with the others (observe.Reader turns it into a skip)."""


# Safe accessors: every from_json reads fields through these, so any JSON at all yields a value or BadObject.
# Absent or null means the default; a value of another JSON type is never coerced (a string is not a list of
# access modes, "false" is not a bool), because a coerced value is a guess, and a guess can make the pass act.
def _typed(obj: Json, key: str, kind: type, what: str) -> Any:
    # dict, not typing.Mapping: JSON objects are dicts (obj_at accepts nothing else), and the ABC check costs
    # about 2 us a field, half the time of reading a node from a watch event (bench/intake.py).
    if not isinstance(obj, dict):
        raise BadObject(f"expected an object holding {key}, got {type(obj).__name__}")
    value = obj.get(key)
    if value is not None and (not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool)):
        raise BadObject(f"{key}: expected {what}, got {type(value).__name__}")
    return value


def obj_at(obj: Json, key: str) -> Json:
    found = _typed(obj, key, dict, "an object")
    return {} if found is None else found


def items_at(obj: Json, key: str) -> list[Json]:
    """A list of objects (conditions, taints, addresses...)."""
    found = _typed(obj, key, list, "a list") or []
    if not all(isinstance(item, dict) for item in found):
        raise BadObject(f"{key}: expected a list of objects")
    return found


def text_at(obj: Json, key: str, default: str = "") -> str:
    found = _typed(obj, key, str, "a string")
    return default if found is None else found


def texts_at(obj: Json, key: str) -> tuple[str, ...]:
    found = _typed(obj, key, list, "a list") or []
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
    return bool(_typed(obj, key, bool, "true or false"))


def int_at(obj: Json, key: str, default: int, low: int = 0, high: int = 2**63 - 1) -> int:
    found = _typed(obj, key, int, "a whole number")
    if found is not None and not low <= found <= high:
        raise BadObject(f"{key}: {found} is outside [{low}, {high}]")
    return default if found is None else found


# RFC 3339 as the API server writes Time and MicroTime: a date, a time, and an explicit offset. A time without
# an offset would be read in this process's time zone, and a date alone is no time at all.
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$")


TIME_YEARS = (1900, 2999)


def parse_time(text: Any) -> Optional[datetime]:
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
        found = datetime.fromisoformat(whole).astimezone(timezone.utc)
    except (ValueError, OverflowError) as err:
        raise BadObject(f"{text[:40]!r} is not a valid time: {err}") from None
    # No clock that writes to a cluster runs outside these years; inside them no age or skew the pass works out
    # can overflow (year 1 or 9999, from a kubelet's clock or a forged stamp, crashed the pass before).
    if not TIME_YEARS[0] <= found.year <= TIME_YEARS[1]:
        raise BadObject(f"{text[:40]!r} is outside the years {TIME_YEARS[0]}-{TIME_YEARS[1]}")
    return found


def time_at(obj: Json, key: str) -> Optional[datetime]:
    try:
        return parse_time(obj.get(key))
    except BadObject as err:
        raise BadObject(f"{key}: {err}") from None


# Object names as the API server validates them (RFC 1123 subdomains; namespaces are labels). A name that is
# not one cannot exist, and must never be put in a request path: the client resolves "..", so a tenant's
# claimName of "../../nodes/x" would read another resource.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def is_name(text: object, namespace: bool = False) -> bool:
    """An object name (a namespace name with `namespace`) that the API server could hold."""
    if not isinstance(text, str):
        return False
    return bool(DNS_LABEL.match(text)) if namespace else len(text) <= 253 and bool(DNS_SUBDOMAIN.match(text))


def server_time(meta: Json, subresource: Optional[str] = None) -> Optional[datetime]:
    """When the API server last saw the object (or, given a subresource, that part of it) change: the latest
    `time` in metadata.managedFields. The server stamps it with its own clock at every write that changes
    something, so it is comparable with the server's Date header, unlike any timestamp a node writes. Whole
    seconds, truncated. None when there is none; BadObject when an entry is not what the server writes."""
    found = []
    for entry in items_at(meta, "managedFields"):
        if subresource is not None and text_at(entry, "subresource") != subresource:
            continue
        stamped = time_at(entry, "time")
        if stamped is not None:
            found.append(stamped)
    return max(found, default=None)


def _opted_out(meta: Json) -> bool:
    # Any value but "false" opts out: when in doubt, leave the object alone.
    value = strings_at(meta, "annotations").get(OPT_OUT_ANNOTATION)
    return value is not None and value.strip().lower() != "false"


# On each recovery record (a ConfigMap in RECOVERY_NAMESPACE, one per claim whose pod we force-deleted, until
# its recovery is confirmed or reported missing): a pass finds them with one label-selected list.
RECOVERY_LABEL = "rwo-failover.io/recovery"
# Where version 0.1 kept the record: on the claim itself, which its tenant may edit. Never read any more
# (docs/monitoring.md says why, and how to remove what 0.1 left behind).
RECOVERY_ANNOTATION = "rwo-failover.io/recovery"


SHUTTING_DOWN = "node is shutting down"  # kubelet nodeshutdown manager's ShutdownStatus(), in Ready's message


def _ready_message(status: Json) -> str:
    return next((text_at(c, "message") for c in items_at(status, "conditions") if text_at(c, "type") == "Ready"), "")


def _ready(status: Json) -> tuple[Optional[str], Optional[datetime]]:
    for cond in items_at(status, "conditions"):
        if text_at(cond, "type") == "Ready":
            return _typed(cond, "status", str, "a string"), time_at(cond, "lastTransitionTime")
    return None, None


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = ""
    time_added: str = ""  # as written, so it can be compared with our annotation

    def as_dict(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "effect": self.effect}

    @property
    def is_ours(self) -> bool:
        """The out-of-service taint exactly as rwo-failover writes it (timeAdded still to match the annotation)."""
        return (self.key, self.value, self.effect) == (OUT_OF_SERVICE_KEY, OUT_OF_SERVICE_VALUE, "NoExecute")

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True)
class Node:
    name: str
    taints: tuple[Taint, ...] = ()
    ready: Optional[str] = None  # "True", "False", "Unknown", or None when never reported
    # The Ready condition's lastTransitionTime: the kubelet's clock for True and False, the node lifecycle
    # controller's for Unknown. Shown, and judged only after its skew is bounded (planner.nodes).
    ready_since: Optional[datetime] = None
    oos_added_at: Optional[str] = None  # our OOS_ANNOTATION: we added the out-of-service taint
    uid: str = ""  # for fencing: the webhook is told exactly which Node object
    provider_id: str = ""
    internal_ips: tuple[str, ...] = ()  # status.addresses of type InternalIP: what a NetworkFence cuts off
    # When its status last changed, on the server's clock (managedFields): for Ready=Unknown, when the node
    # lifecycle controller marked it, or later.
    status_written_at: Optional[datetime] = None
    # The kubelet says it is shutting down gracefully (Ready=False, "node is shutting down", from the kubelet's
    # node shutdown manager): it renews its Lease for its grace period, then stops.
    shutting_down: bool = False

    @property
    def has_oos_taint(self) -> bool:
        return any(t.key == OUT_OF_SERVICE_KEY for t in self.taints)

    @property
    def our_taint(self) -> Optional[Taint]:
        """Our out-of-service taint: exactly what we write, with the timeAdded our annotation recorded.

        A human who removed our taint leaves the annotation; a taint they add later has another timeAdded
        (or none), so it is never taken for ours.
        """
        if not self.oos_added_at:
            return None
        return next((t for t in self.taints if t.is_ours and t.time_added == self.oos_added_at), None)

    @classmethod
    def from_json(cls, obj: Json) -> "Node":
        meta, spec, status = obj_at(obj, "metadata"), obj_at(obj, "spec"), obj_at(obj, "status")
        ready, since = _ready(status)
        taints = tuple(Taint(text_at(t, "key"), text_at(t, "value"), text_at(t, "effect"), text_at(t, "timeAdded"))
                       for t in items_at(spec, "taints"))
        ips = tuple(text_at(a, "address") for a in items_at(status, "addresses")
                    if text_at(a, "type") == "InternalIP" and text_at(a, "address"))
        return cls(text_at(meta, "name"), taints, ready, since, strings_at(meta, "annotations").get(OOS_ANNOTATION),
                   text_at(meta, "uid"), text_at(spec, "providerID"), ips,
                   server_time(meta, "status"), ready == "False" and SHUTTING_DOWN in _ready_message(status))


@dataclass(frozen=True)
class Lease:
    node: str
    renew_time: Optional[datetime]  # spec.renewTime: the kubelet's own clock, so it never times anything alone
    duration: int = DEFAULT_LEASE_SECONDS  # spec.leaseDurationSeconds: the kubelet renews well within it
    version: str = ""  # metadata.resourceVersion: another value later means it changed in between
    changed_at: Optional[datetime] = None  # its last change (a renewal), on the server's clock (managedFields)

    @property
    def kubelet_skew(self) -> Optional[float]:
        """How far the kubelet's clock runs ahead of the server's, measured on one write: the renewTime it
        wrote against the time the server stamped on that write. Up to a second high (the stamp is truncated)."""
        if self.renew_time is None or self.changed_at is None:
            return None
        return (self.renew_time - self.changed_at).total_seconds()

    @classmethod
    def from_json(cls, obj: Json) -> "Lease":
        meta, spec = obj_at(obj, "metadata"), obj_at(obj, "spec")
        # At least 1 s, as the API server validates it: a duration of 0 or less would make a heartbeating
        # kubelet's Lease look stale.
        return cls(text_at(meta, "name"), time_at(spec, "renewTime"),
                   int_at(spec, "leaseDurationSeconds", DEFAULT_LEASE_SECONDS, low=1) or DEFAULT_LEASE_SECONDS,
                   text_at(meta, "resourceVersion"), server_time(meta))


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    uid: str
    node: str
    labels: Mapping[str, str] = field(default_factory=dict)
    controller_kind: Optional[str] = None
    mirror: bool = False
    opted_out: bool = False
    deleting: bool = False
    phase: Optional[str] = None
    reason: Optional[str] = None
    ready: Optional[str] = None  # None when the pod has no Ready condition: it never started
    claims: tuple[str, ...] = ()  # PVC names, generic ephemeral ones included
    ready_since: Optional[datetime] = None  # the Ready condition's lastTransitionTime
    controller_name: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_json(cls, obj: Json) -> "Pod":
        meta, spec, status = obj_at(obj, "metadata"), obj_at(obj, "spec"), obj_at(obj, "status")
        controller = next((ref for ref in items_at(meta, "ownerReferences") if bool_at(ref, "controller")), {})
        ready, ready_since = _ready(status)
        return cls(
            namespace=text_at(meta, "namespace"), name=text_at(meta, "name"), uid=text_at(meta, "uid"),
            node=text_at(spec, "nodeName"), labels=strings_at(meta, "labels"),
            controller_kind=_typed(controller, "kind", str, "a string"), controller_name=text_at(controller, "name"),
            mirror=MIRROR_ANNOTATION in strings_at(meta, "annotations"),
            opted_out=_opted_out(meta), deleting=time_at(meta, "deletionTimestamp") is not None,
            phase=_typed(status, "phase", str, "a string"), reason=_typed(status, "reason", str, "a string"),
            ready=ready, claims=_claim_names(text_at(meta, "name"), items_at(spec, "volumes")), ready_since=ready_since,
        )


def _claim_names(pod_name: str, volumes: list[Json]) -> tuple[str, ...]:
    names = []
    for vol in volumes:
        if vol.get("persistentVolumeClaim") is not None:
            names.append(text_at(obj_at(vol, "persistentVolumeClaim"), "claimName"))
        elif vol.get("ephemeral") is not None:
            obj_at(vol, "ephemeral")
            # A generic ephemeral volume's PVC is named <pod>-<volume> by the ephemeral controller.
            names.append(f"{pod_name}-{text_at(vol, 'name')}")
    return tuple(dict.fromkeys(n for n in names if n))


@dataclass(frozen=True)
class Claim:
    namespace: str
    name: str
    uid: str
    volume: str  # spec.volumeName: the PV it names, which proves nothing until the PV names it back
    bound: bool = True  # status.phase == Bound
    opted_out: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_json(cls, obj: Json) -> "Claim":
        meta, spec, status = obj_at(obj, "metadata"), obj_at(obj, "spec"), obj_at(obj, "status")
        return cls(text_at(meta, "namespace"), text_at(meta, "name"), text_at(meta, "uid"),
                   text_at(spec, "volumeName"), text_at(status, "phase") == "Bound", _opted_out(meta))


@dataclass(frozen=True)
class Volume:
    """A PersistentVolume: which claim it is bound to (by name and uid), and its access modes."""

    name: str
    claim: str  # "namespace/name" from spec.claimRef, "" when unbound
    claim_uid: str
    access_modes: frozenset[str]

    @property
    def exclusive(self) -> bool:
        """A second node cannot attach it: the attach-detach controller's Multi-Attach rule."""
        return not self.access_modes & MULTI_ATTACH_MODES

    def bound_to(self, claim: "Claim") -> bool:
        """Both directions agree: the claim is Bound and names this PV, and this PV names the claim and its uid."""
        return (claim.bound and claim.volume == self.name and self.claim == claim.key
                and bool(self.claim_uid) and self.claim_uid == claim.uid)

    @classmethod
    def from_json(cls, obj: Json) -> "Volume":
        spec = obj_at(obj, "spec")
        ref = obj_at(spec, "claimRef")
        claim = f"{text_at(ref, 'namespace')}/{text_at(ref, 'name')}" if text_at(ref, "name") else ""
        return cls(text_at(obj_at(obj, "metadata"), "name"), claim, text_at(ref, "uid"),
                   frozenset(texts_at(spec, "accessModes")))


@dataclass(frozen=True)
class Attachment:
    name: str
    node: str
    volume: str  # spec.source.persistentVolumeName; "" for inline volumes
    inline: bool = False  # spec.source.inlineVolumeSpec (CSI migration): no PV to trace it to a claim
    deleting: bool = False  # deletionTimestamp set: the attacher is still detaching it
    # status.attached never decides a release (an attachment pins the volume either way); it only tells
    # recovery confirmation that the replacement's volume is really attached.
    attached: bool = False

    @classmethod
    def from_json(cls, obj: Json) -> "Attachment":
        meta, spec = obj_at(obj, "metadata"), obj_at(obj, "spec")
        source = obj_at(spec, "source")
        return cls(text_at(meta, "name"), text_at(spec, "nodeName"), text_at(source, "persistentVolumeName"),
                   bool(obj_at(source, "inlineVolumeSpec")), time_at(meta, "deletionTimestamp") is not None,
                   bool_at(obj_at(obj, "status"), "attached"))


FENCE_LABEL = "app.kubernetes.io/managed-by"  # value "rwo-failover": a NetworkFence we created
# On a NetworkFence of ours whose spec we changed (to Unfenced): which generation that made, and the status it
# had then. For a controller that sets no observedGeneration, a result counts for that generation only once
# the status differs from what it was when we asked.
FENCE_ASKED_ANNOTATION = "rwo-failover.io/asked"


@dataclass(frozen=True)
class Fence:
    """A csiaddons NetworkFence named after a node: what we asked (Fenced/Unfenced) and what it answered."""

    node: str
    ours: bool
    state: str  # spec.fenceState: "Fenced" or "Unfenced"
    result: str  # status.result: "Succeeded", "Failed", or "" while pending (or stale: see from_json)
    message: str = ""
    cidrs: tuple[str, ...] = ()  # spec.cidrs: what it fences
    deleting: bool = False  # deletionTimestamp set: a finalizer holds it
    generation: int = 0
    status: tuple[str, str] = ("", "")  # (status.result, status.message) as read, current or not

    @classmethod
    def from_json(cls, obj: Json) -> "Fence":
        """A result counts only when it answers the current spec: a condition observed this generation; or,
        from a controller that sets no observedGeneration (csi-addons sets none), the spec was never changed
        since we created it (generation 1), or the status changed since we changed the spec (our annotation).
        A Succeeded left from the previous state never counts, whatever its message says."""
        meta, spec, status = obj_at(obj, "metadata"), obj_at(obj, "spec"), obj_at(obj, "status")
        result, message = text_at(status, "result"), text_at(status, "message")
        generation = int_at(meta, "generation", 0)
        observed = [int_at(c, "observedGeneration", 0) for c in items_at(status, "conditions")]
        asked = _fence_asked(strings_at(meta, "annotations").get(FENCE_ASKED_ANNOTATION))
        if any(observed):
            current = max(observed) >= generation
        elif asked is None:
            current = generation <= 1
        else:
            current = asked[0] == generation and asked[1] != (result, message)
        return cls(text_at(meta, "name"), strings_at(meta, "labels").get(FENCE_LABEL) == "rwo-failover",
                   text_at(spec, "fenceState"), result if current else "", message, texts_at(spec, "cidrs"),
                   time_at(meta, "deletionTimestamp") is not None, generation, (result, message))


def fence_asked(generation: int, status: tuple[str, str]) -> str:
    """The FENCE_ASKED_ANNOTATION we write with a spec change: the generation it makes, and the status before."""
    return json.dumps({"generation": generation, "result": status[0], "message": status[1]}, sort_keys=True)


def _fence_asked(text: Optional[str]) -> Optional[tuple[int, tuple[str, str]]]:
    if text is None:
        return None
    try:
        found = json.loads(text)
    except ValueError:
        raise BadObject(f"annotation {FENCE_ASKED_ANNOTATION} is not JSON") from None
    if not isinstance(found, dict):
        raise BadObject(f"annotation {FENCE_ASKED_ANNOTATION} is not an object")
    return int_at(found, "generation", 0, low=1), (text_at(found, "result"), text_at(found, "message"))


@dataclass(frozen=True)
class RecoveryEntry:
    """A recovery record as stored: its ConfigMap's name and data.record (parsed by planner.recovery)."""

    name: str
    record: Any
    resource_version: str = ""

    @classmethod
    def from_json(cls, obj: Json) -> "RecoveryEntry":
        meta = obj_at(obj, "metadata")
        return cls(text_at(meta, "name"), obj_at(obj, "data").get("record"), text_at(meta, "resourceVersion"))


@dataclass(frozen=True)
class Unreadable:
    """An object observe could not read (a BadObject): skipped with this reason. `node` names the node it was
    read for (a pod on it, the claim or PV of such a pod), when there is one."""

    kind: str
    name: str
    reason: str
    node: str = ""


@dataclass(frozen=True)
class Snapshot:
    """What observe read. `leases` holds an entry for every tainted node (None when absent)."""

    now: datetime
    nodes: tuple[Node, ...]
    leases: Mapping[str, Optional[Lease]] = field(default_factory=dict)
    pods: tuple[Pod, ...] = ()
    claims: Mapping[str, Claim] = field(default_factory=dict)  # keyed "namespace/name"
    attachments: tuple[Attachment, ...] = ()
    volumes: Mapping[str, Volume] = field(default_factory=dict)  # PVs of the claims read, and of attachments
    server_version: Optional[tuple[int, int]] = None  # read only when OUT_OF_SERVICE_TAINT=auto needs it
    fences: Mapping[str, Fence] = field(default_factory=dict)  # NetworkFences by node, when FENCING=networkfence
    # Recovery confirmation: our records; the pods that may be the replacements (and the freed pods, if still
    # there); in `claims`, `volumes` and `attachments` (whatever node) their claims, PVs and attachments.
    recovery_records: tuple[RecoveryEntry, ...] = ()
    recovery_pods: tuple[Pod, ...] = ()
    unreadable: tuple[Unreadable, ...] = ()  # objects skipped because they could not be read
