"""Decide: a pure function from a cluster snapshot and the settings to a plan.

Every rule about what may be touched lives here. Nothing in this module does
I/O or reads a clock, so it can be tested exhaustively; observe and act call
the same functions, so the live re-check before acting uses the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Iterable, Mapping, Optional, Sequence

from .config import Settings
from .matchers import TaintSpec, any_taint_matches
from .model import OOS_KEY, Attachment, Claim, Lease, Node, Pod, Volume

OUT_OF_SERVICE_SINCE = (1, 28)  # the out-of-service taint's force-detach is GA from Kubernetes 1.28
LEASE_FRESH_SECONDS = 40  # kubelet's default node lease duration: renewed within it means heartbeating


class NodeState(str, Enum):
    DOWN = "down"          # proven down: safe to act on
    NOT_YET = "not-yet"    # NotReady, but not for long enough; exit 0
    ALIVE = "alive"        # tainted for shutdown yet Ready or heartbeating; exit 3
    RECOVERING = "recovering"  # alive again, and the only shutdown taint is the one we added; exit 0


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    state: NodeState
    taint: str
    reason: str


@dataclass(frozen=True)
class Snapshot:
    """What observe read. `leases` holds an entry for every tainted node (None when absent)."""

    now: datetime
    nodes: tuple[Node, ...]
    leases: Mapping[str, Optional[Lease]] = field(default_factory=dict)
    pods: tuple[Pod, ...] = ()
    claims: Mapping[str, Claim] = field(default_factory=dict)  # keyed "namespace/name"
    attachments: tuple[Attachment, ...] = ()
    volumes: Mapping[str, Volume] = field(default_factory=dict)  # PVs of attachments no pod explains
    server_version: Optional[tuple[int, int]] = None  # read only when OUT_OF_SERVICE_TAINT=auto needs it


@dataclass(frozen=True)
class PodAction:
    namespace: str
    name: str
    uid: str
    node: str
    reason: str
    claims: tuple[str, ...]  # the pod's RWO claims, "namespace/name"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class AttachmentAction:
    name: str
    node: str
    volume: str
    claim: str
    after_pods: tuple[str, ...]  # delete only once all of these pods are gone


@dataclass(frozen=True)
class NodePlan:
    verdict: NodeVerdict
    pods: tuple[PodAction, ...] = ()
    attachments: tuple[AttachmentAction, ...] = ()
    add_taint: bool = False  # add node.kubernetes.io/out-of-service before deleting anything

    @property
    def has_work(self) -> bool:
        return bool(self.pods or self.attachments or self.add_taint)


@dataclass(frozen=True)
class Skip:
    kind: str  # "node", "pod" or "volumeattachment"
    name: str
    reason: str


class UnsafePlan(Exception):
    """The brake refused the whole pass."""


@dataclass(frozen=True)
class Plan:
    verdicts: tuple[NodeVerdict, ...]
    nodes: tuple[NodePlan, ...]
    skips: tuple[Skip, ...]
    refusal: Optional[str] = None
    not_ready: int = 0
    total_nodes: int = 0
    untaint: tuple[str, ...] = ()  # recovered nodes whose out-of-service taint (ours) comes off

    @property
    def pod_count(self) -> int:
        return sum(len(n.pods) for n in self.nodes)

    @property
    def attachment_count(self) -> int:
        return sum(len(n.attachments) for n in self.nodes)

    @property
    def split_brain(self) -> tuple[NodeVerdict, ...]:
        return tuple(v for v in self.verdicts if v.state is NodeState.ALIVE)

    def raise_if_unsafe(self) -> None:
        if self.refusal:
            raise UnsafePlan(self.refusal)


def shutdown_taint(node: Node, specs: Sequence[TaintSpec]) -> Optional[TaintSpec]:
    return any_taint_matches(specs, [t.as_dict() for t in node.taints])


def _age(now: datetime, then: datetime) -> float:
    return (now - then).total_seconds()


def judge_node(node: Node, lease: Optional[Lease], taint: TaintSpec, min_seconds: int,
               now: datetime) -> NodeVerdict:
    """Is a tainted node proven down? Alive signals are checked first: they win."""
    def verdict(state: NodeState, reason: str) -> NodeVerdict:
        return NodeVerdict(node.name, state, str(taint), reason)

    if node.ready == "True":
        return verdict(NodeState.ALIVE, "tainted for shutdown but still heartbeating: Ready=True")
    if lease is not None and lease.renew_time is not None and _age(now, lease.renew_time) < min_seconds:
        age = _age(now, lease.renew_time)
        return verdict(NodeState.ALIVE,
                       f"tainted for shutdown but still heartbeating: Lease renewed {age:.0f}s ago")
    if node.ready is None or node.ready_since is None:
        return verdict(NodeState.NOT_YET, "no Ready condition with a transition time")
    age = _age(now, node.ready_since)
    if age < min_seconds:
        return verdict(NodeState.NOT_YET, f"Ready={node.ready} for {age:.0f}s, under {min_seconds}s")
    lease_text = "no Lease" if lease is None or lease.renew_time is None else \
        f"Lease unrenewed for {_age(now, lease.renew_time):.0f}s"
    return verdict(NodeState.DOWN, f"Ready={node.ready} for {age:.0f}s, {lease_text}")


def only_our_taint(node: Node, specs: Sequence[TaintSpec]) -> bool:
    """The node's only shutdown taint is the out-of-service taint that we added (and annotated)."""
    matching = [t for t in node.taints if any(spec.matches(t.as_dict()) for spec in specs)]
    return node.oos_added_at is not None and bool(matching) and all(t.key == OOS_KEY for t in matching)


def judge(node: Node, lease: Optional[Lease], taint: TaintSpec, settings: Settings, now: datetime) -> NodeVerdict:
    """judge_node, plus: an alive node whose only shutdown taint is ours is recovering, not split-brain."""
    verdict = judge_node(node, lease, taint, settings.min_not_ready_seconds, now)
    if verdict.state is NodeState.ALIVE and only_our_taint(node, settings.shutdown_taints):
        return NodeVerdict(node.name, NodeState.RECOVERING, verdict.taint,
                           "alive again and carries only the out-of-service taint rwo-failover added")
    return verdict


def recovered(node: Node, lease: Optional[Lease], settings: Settings, now: datetime) -> bool:
    """Ready for RECOVERY_SECONDS with a fresh Lease: our out-of-service taint may come off."""
    return (node.ready == "True" and node.ready_since is not None
            and _age(now, node.ready_since) >= settings.recovery_seconds
            and lease is not None and lease.renew_time is not None
            and _age(now, lease.renew_time) < LEASE_FRESH_SECONDS)


def wants_out_of_service(snapshot: Snapshot, settings: Settings) -> bool:
    if settings.out_of_service_taint == "auto":
        return snapshot.server_version is not None and snapshot.server_version >= OUT_OF_SERVICE_SINCE
    return settings.out_of_service_taint == "always"


def tainted_nodes(nodes: Iterable[Node], settings: Settings) -> list[tuple[Node, TaintSpec]]:
    found = ((node, shutdown_taint(node, settings.shutdown_taints)) for node in nodes)
    return sorted(((n, t) for n, t in found if t is not None), key=lambda pair: pair[0].name)


def judge_nodes(snapshot: Snapshot, settings: Settings) -> list[NodeVerdict]:
    return [judge(node, snapshot.leases.get(node.name), taint, settings, snapshot.now)
            for node, taint in tainted_nodes(snapshot.nodes, settings)]


def node_brake(snapshot: Snapshot, settings: Settings, verdicts: Sequence[NodeVerdict]) -> Optional[str]:
    """Why the whole pass must act on nothing, judged on nodes alone; None when it may go on."""
    total = len(snapshot.nodes)
    not_ready = sum(1 for n in snapshot.nodes if n.ready != "True")
    if total and not_ready / total > settings.max_unhealthy_fraction:
        return (f"brake: {not_ready} of {total} nodes are not Ready, more than MAX_UNHEALTHY_FRACTION="
                f"{settings.max_unhealthy_fraction:g}; the control plane may be partitioned")
    down = sum(1 for v in verdicts if v.state is NodeState.DOWN)
    if down > settings.max_nodes_per_pass:
        return f"brake: {down} nodes are proven down, more than MAX_NODES_PER_PASS={settings.max_nodes_per_pass}"
    return None


def nodes_to_inspect(snapshot: Snapshot, settings: Settings) -> list[str]:
    """The nodes whose pods observe must read: proven down, and the brake not tripped."""
    verdicts = judge_nodes(snapshot, settings)
    if node_brake(snapshot, settings, verdicts):
        return []
    return [v.node for v in verdicts if v.state is NodeState.DOWN]


def stuck_states(pod: Pod) -> list[str]:
    states = []
    if pod.deleting:
        states.append("Terminating")
    if pod.phase == "Unknown":
        states.append("Unknown")
    if pod.reason == "NodeLost":
        states.append("NodeLost")
    if pod.ready in ("False", "Unknown"):
        states.append("NotReady")
    return states


def pod_exclusion(pod: Pod, settings: Settings) -> Optional[str]:
    """Why a pod on a down node is never touched, judged without its claims; None when eligible."""
    if pod.mirror:
        return "mirror/static pod"
    if pod.controller_kind == "DaemonSet":
        return "DaemonSet pod"
    if pod.namespace in settings.exclude_namespaces:
        return "namespace is in EXCLUDE_NAMESPACES"
    if settings.include_namespaces and pod.namespace not in settings.include_namespaces:
        return "namespace is not in INCLUDE_NAMESPACES"
    if settings.pod_selector and not settings.pod_selector.matches(pod.labels):
        return f"labels do not match POD_SELECTOR={settings.pod_selector.text!r}"
    if pod.opted_out:
        return "pod is annotated rwo-failover.io/opt-out"
    if not set(stuck_states(pod)) & settings.stuck_pod_states:
        return f"not stuck (phase={pod.phase}, ready={pod.ready}, not terminating)"
    return None


def _claims_of(pod: Pod, claims: Mapping[str, Claim]) -> list[Claim]:
    """The pod's claims that were read (a claim that could not be read is simply absent)."""
    return [c for c in (claims.get(f"{pod.namespace}/{name}") for name in pod.claims) if c is not None]


def _opted_out_claim(pod: Pod, claims: Mapping[str, Claim]) -> Optional[Claim]:
    return next((c for c in _claims_of(pod, claims) if c.opted_out), None)


def _rwo_claims(pod: Pod, claims: Mapping[str, Claim]) -> tuple[list[Claim], Optional[str]]:
    opted = _opted_out_claim(pod, claims)
    if opted is not None:
        return [], f"PVC {opted.key} is annotated rwo-failover.io/opt-out"
    found = [c for c in _claims_of(pod, claims) if c.rwo]
    return found, None if found else "mounts no ReadWriteOnce/ReadWriteOncePod PVC"


def _select_pods(pods: Sequence[Pod], snapshot: Snapshot, settings: Settings,
                 skips: list[Skip]) -> list[tuple[Pod, list[Claim]]]:
    selected = []
    for pod in pods:
        reason = pod_exclusion(pod, settings)
        claims: list[Claim] = []
        if reason is None:
            claims, reason = _rwo_claims(pod, snapshot.claims)
        if reason:
            skips.append(Skip("pod", pod.key, reason))
        else:
            selected.append((pod, claims))
    return selected


def _attachments_for(node: str, selected: Sequence[tuple[Pod, list[Claim]]], pods: Sequence[Pod],
                     snapshot: Snapshot, settings: Settings, skips: list[Skip]) -> list[AttachmentAction]:
    """VolumeAttachments on this node to release: those of the selected pods' RWO claims, and orphans."""
    by_volume: dict[str, tuple[str, list[str]]] = {}
    for pod, claims in selected:
        for claim in claims:
            if claim.volume:
                by_volume.setdefault(claim.volume, (claim.key, []))[1].append(pod.key)
    chosen = {pod.key for pod, _ in selected}
    # A volume still used by a pod we are not deleting stays attached, or it would be yanked from under it.
    kept_claims = {f"{p.namespace}/{c}" for p in pods if p.key not in chosen for c in p.claims}
    used_claims = kept_claims | {c.key for _, claims in selected for c in claims}
    actions = []
    for att in sorted(snapshot.attachments, key=lambda a: a.name):
        if att.node != node:
            continue
        if att.volume not in by_volume:
            action, reason = _orphan(att, snapshot, settings, used_claims)
            if action:
                actions.append(action)
            elif reason:
                skips.append(Skip("volumeattachment", att.name, reason))
            continue
        claim_key, pod_keys = by_volume[att.volume]
        if claim_key in kept_claims:
            skips.append(Skip("volumeattachment", att.name, f"PV {att.volume} is also used by a pod left in place"))
            continue
        actions.append(AttachmentAction(att.name, node, att.volume, claim_key, tuple(pod_keys)))
    return actions


def _orphan(att: Attachment, snapshot: Snapshot, settings: Settings,
            used_claims: set[str]) -> tuple[Optional[AttachmentAction], Optional[str]]:
    """An attachment on a proven-down node whose RWO claim no pod on that node uses any more.

    It is what an earlier pass (or a human's force delete) leaves when the pod went but its
    attachment could not be deleted; with no pod to find it by, only this rule releases it.
    """
    volume = snapshot.volumes.get(att.volume)
    if volume is None or not volume.claim or volume.claim in used_claims:
        return None, None  # not ours to judge: no PV read, unbound, or a pod on the node still uses it
    claim = snapshot.claims.get(volume.claim)
    if claim is None or claim.volume != volume.name or not claim.rwo:
        return None, None
    if claim.opted_out:
        return None, f"orphaned, but PVC {claim.key} is annotated rwo-failover.io/opt-out"
    if claim.namespace in settings.exclude_namespaces or (
            settings.include_namespaces and claim.namespace not in settings.include_namespaces):
        return None, f"orphaned, but PVC {claim.key} is in a namespace outside the filters"
    if settings.pod_selector:
        return None, "orphaned, but POD_SELECTOR is set and no pod is left to match it"
    return AttachmentAction(att.name, att.node, att.volume, claim.key, ()), None


def _taint_blocker(pods: Sequence[Pod], claims: Mapping[str, Claim]) -> Optional[str]:
    """Why the out-of-service taint must not go on: Kubernetes would then force-delete an opted-out pod."""
    for pod in pods:
        if pod.opted_out or _opted_out_claim(pod, claims) is not None:
            return f"out-of-service taint not added: {pod.key} is opted out, and the taint would let " \
                   "Kubernetes force-delete it"
    return None


def _plan_node(verdict: NodeVerdict, node: Node, snapshot: Snapshot, settings: Settings,
               skips: list[Skip]) -> NodePlan:
    pods = sorted((p for p in snapshot.pods if p.node == verdict.node), key=lambda p: p.key)
    selected = _select_pods(pods, snapshot, settings, skips)
    attachments = _attachments_for(verdict.node, selected, pods, snapshot, settings, skips)
    actions = tuple(PodAction(pod.namespace, pod.name, pod.uid, pod.node,
                              "stuck: " + ",".join(s for s in stuck_states(pod) if s in settings.stuck_pod_states)
                              + f" on node {verdict.node} ({verdict.taint})",
                              tuple(c.key for c in claims))
                    for pod, claims in selected)
    add_taint = wants_out_of_service(snapshot, settings) and not node.has_oos_taint
    blocker = _taint_blocker(pods, snapshot.claims) if add_taint else None
    if blocker:
        skips.append(Skip("node", node.name, blocker))
    return NodePlan(verdict, actions, tuple(attachments), add_taint and blocker is None)


def _untaint(verdicts: Sequence[NodeVerdict], nodes: Mapping[str, Node], snapshot: Snapshot, settings: Settings,
             skips: list[Skip]) -> tuple[str, ...]:
    ready = []
    for verdict in (v for v in verdicts if v.state is NodeState.RECOVERING):
        if recovered(nodes[verdict.node], snapshot.leases.get(verdict.node), settings, snapshot.now):
            ready.append(verdict.node)
        else:
            skips.append(Skip("node", verdict.node, f"our out-of-service taint stays until Ready for "
                                                    f"RECOVERY_SECONDS={settings.recovery_seconds} with a fresh Lease"))
    return tuple(ready)


def plan(snapshot: Snapshot, settings: Settings) -> Plan:
    """The whole decision for one pass."""
    verdicts = judge_nodes(snapshot, settings)
    skips = [Skip("node", v.node, v.reason) for v in verdicts if v.state is not NodeState.DOWN]
    nodes = {n.name: n for n in snapshot.nodes}
    totals = {"not_ready": sum(1 for n in snapshot.nodes if n.ready != "True"),
              "total_nodes": len(snapshot.nodes), "untaint": _untaint(verdicts, nodes, snapshot, settings, skips)}
    refusal = node_brake(snapshot, settings, verdicts)
    if refusal:
        return Plan(tuple(verdicts), (), tuple(skips), refusal, **totals)
    node_plans = tuple(_plan_node(v, nodes[v.node], snapshot, settings, skips)
                       for v in verdicts if v.state is NodeState.DOWN)
    pods = sum(len(n.pods) for n in node_plans)
    if pods > settings.max_pods_per_pass:
        refusal = f"brake: {pods} pods are selected, more than MAX_PODS_PER_PASS={settings.max_pods_per_pass}"
    return Plan(tuple(verdicts), node_plans, tuple(skips), refusal, **totals)
