"""The slim, immutable view of cluster objects that a pass works on.

Observe turns raw API JSON into these, keeping only the fields the rules use,
so a 5,000-node list does not stay in memory as full objects.
"""

from __future__ import annotations

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


def parse_time(text: Optional[str]) -> Optional[datetime]:
    """RFC 3339 (and MicroTime) to an aware datetime; None stays None."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def server_time(entries: Any, subresource: Optional[str] = None) -> Optional[datetime]:
    """When the API server last saw the object (or, given a subresource, that part of it) change: the latest
    `time` in metadata.managedFields. The server stamps it with its own clock at every write that changes
    something, so it is comparable with the server's Date header, unlike any timestamp a node writes. Whole
    seconds, truncated. None when there is none (or none that parses)."""
    found = []
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict):
            continue
        if subresource is not None and (entry.get("subresource") or "") != subresource:
            continue
        try:
            found.append(parse_time(entry.get("time")))
        except (ValueError, TypeError, AttributeError):
            continue
    return max((t for t in found if t is not None), default=None)


def _opted_out(meta: Json) -> bool:
    # Any value but "false" opts out: when in doubt, leave the object alone.
    value = (meta.get("annotations") or {}).get(OPT_OUT_ANNOTATION)
    return value is not None and value.strip().lower() != "false"


# Set on a claim whose pod we force-deleted, until its recovery is confirmed or reported missing. The label
# lets a pass find them with one label-selected list; the annotation holds the record (JSON).
RECOVERY_LABEL = "rwo-failover.io/recovery"
RECOVERY_ANNOTATION = "rwo-failover.io/recovery"


def _ready(conditions: Any) -> tuple[Optional[str], Optional[datetime]]:
    for cond in conditions or ():
        if cond.get("type") == "Ready":
            return cond.get("status"), parse_time(cond.get("lastTransitionTime"))
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
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        ready, since = _ready((obj.get("status") or {}).get("conditions"))
        taints = tuple(Taint(t.get("key", ""), t.get("value", ""), t.get("effect", ""), t.get("timeAdded") or "")
                       for t in spec.get("taints") or ())
        ips = tuple(a.get("address", "") for a in (obj.get("status") or {}).get("addresses") or ()
                    if a.get("type") == "InternalIP" and a.get("address"))
        return cls(meta.get("name", ""), taints, ready, since, (meta.get("annotations") or {}).get(OOS_ANNOTATION),
                   meta.get("uid", ""), spec.get("providerID", ""), ips,
                   server_time(meta.get("managedFields"), "status"))


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
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        return cls(meta.get("name", ""), parse_time(spec.get("renewTime")),
                   int(spec.get("leaseDurationSeconds") or DEFAULT_LEASE_SECONDS),
                   str(meta.get("resourceVersion") or ""), server_time(meta.get("managedFields")))


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
        meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
        controller = next((ref for ref in meta.get("ownerReferences") or () if ref.get("controller")), {})
        ready, ready_since = _ready(status.get("conditions"))
        return cls(
            namespace=meta.get("namespace", ""), name=meta.get("name", ""), uid=meta.get("uid", ""),
            node=spec.get("nodeName", ""), labels=dict(meta.get("labels") or {}),
            controller_kind=controller.get("kind"), controller_name=controller.get("name", ""),
            mirror=MIRROR_ANNOTATION in (meta.get("annotations") or {}),
            opted_out=_opted_out(meta), deleting=bool(meta.get("deletionTimestamp")),
            phase=status.get("phase"), reason=status.get("reason"), ready=ready,
            claims=_claim_names(meta.get("name", ""), spec.get("volumes") or ()), ready_since=ready_since,
        )


def _claim_names(pod_name: str, volumes: Any) -> tuple[str, ...]:
    names = []
    for vol in volumes:
        if vol.get("persistentVolumeClaim"):
            names.append(vol["persistentVolumeClaim"].get("claimName", ""))
        elif vol.get("ephemeral"):
            # A generic ephemeral volume's PVC is named <pod>-<volume> by the ephemeral controller.
            names.append(f"{pod_name}-{vol.get('name', '')}")
    return tuple(dict.fromkeys(n for n in names if n))


@dataclass(frozen=True)
class Claim:
    namespace: str
    name: str
    uid: str
    volume: str  # spec.volumeName: the PV it names, which proves nothing until the PV names it back
    bound: bool = True  # status.phase == Bound
    opted_out: bool = False
    recovery: str = ""  # our RECOVERY_ANNOTATION (JSON), while we wait to confirm its pod came back

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_json(cls, obj: Json) -> "Claim":
        meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
        return cls(meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", ""),
                   spec.get("volumeName") or "", status.get("phase") == "Bound", _opted_out(meta),
                   (meta.get("annotations") or {}).get(RECOVERY_ANNOTATION, ""))


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
        spec = obj.get("spec") or {}
        ref = spec.get("claimRef") or {}
        claim = f"{ref.get('namespace', '')}/{ref.get('name', '')}" if ref.get("name") else ""
        return cls((obj.get("metadata") or {}).get("name", ""), claim, ref.get("uid") or "",
                   frozenset(spec.get("accessModes") or ()))


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
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        source = spec.get("source") or {}
        return cls(meta.get("name", ""), spec.get("nodeName", ""), source.get("persistentVolumeName") or "",
                   bool(source.get("inlineVolumeSpec")), bool(meta.get("deletionTimestamp")),
                   bool((obj.get("status") or {}).get("attached")))


FENCE_LABEL = "app.kubernetes.io/managed-by"  # value "rwo-failover": a NetworkFence we created


@dataclass(frozen=True)
class Fence:
    """A csiaddons NetworkFence named after a node: what we asked (Fenced/Unfenced) and what it answered."""

    node: str
    ours: bool
    state: str  # spec.fenceState: "Fenced" or "Unfenced"
    result: str  # status.result: "Succeeded", "Failed", or "" while pending (or stale: see from_json)
    message: str = ""

    @classmethod
    def from_json(cls, obj: Json) -> "Fence":
        """A result left over from the previous state (Succeeded for Fenced, after we asked for Unfenced) must
        not count: it is current only when a condition observed this generation of the spec, or, from a
        controller that sets no conditions, when its message speaks of the state asked for."""
        meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
        state, message = spec.get("fenceState", ""), status.get("message", "")
        observed = [c.get("observedGeneration") for c in status.get("conditions") or () if c.get("observedGeneration")]
        if observed:
            current = max(observed) >= int(meta.get("generation") or 0)
        else:
            current = message.lower().startswith("unfenc") == (state == "Unfenced")
        return cls(meta.get("name", ""), (meta.get("labels") or {}).get(FENCE_LABEL) == "rwo-failover",
                   state, status.get("result", "") if current else "", message)


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
    # Recovery confirmation: claims carrying our RECOVERY_LABEL, the pods of their namespaces, and (in
    # `attachments`, whatever node) the attachments of their PVs.
    recovering_claims: tuple[Claim, ...] = ()
    namespace_pods: tuple[Pod, ...] = ()
