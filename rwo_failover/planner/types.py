"""The planner's vocabulary: verdicts, actions, skips, typed refusals, and the Plan itself."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from ..model import TaintRecord
from ..model.control import NOT_PAUSED, Pause

if TYPE_CHECKING:  # recovery.py imports this module (through liveness.py): the Verdict type is for the checker only
    from .recovery import Verdict

# The recovery verdicts whose settling writes (act/recovery.py): a record deleted, with its Event.
SETTLING = ("recovered", "not-recovered", "obsolete")


class NodeState(StrEnum):
    DOWN = "down"                # proven down: safe to act on
    NOT_YET = "not-yet"          # not proven down yet; exit 0
    SPLIT_BRAIN = "split-brain"  # tainted for shutdown yet Ready or heartbeating; exit 3
    RECOVERING = "recovering"    # alive again, and the only shutdown taint is the one we added; exit 0


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    state: NodeState
    taint: str
    reason: str
    not_ready_since: str = ""  # the Ready condition's lastTransitionTime, when not Ready: failover starts here
    # When this verdict changes with nothing but time passing (server clock); None when only a change in the
    # cluster can change it. Continuous mode wakes up for it.
    changes_at: datetime | None = None
    # Why the node could not be judged at all (no server stamp, clocks that disagree): a human should look.
    unjudged: str = ""
    # Held back only because this process has not itself watched the node long enough yet (observe/sightings.py),
    # until changes_at: NOT_YET for a shutdown-tainted node down by the server's stamps (the brakes leave it out
    # when it holds nothing, as a stopped instance); DOWN for a silent node with FENCING=redfish, whose BMC is asked
    # but told to power nothing off yet. A one-shot run waits for either (run/once.py), whatever ONCE_WAIT_SECONDS.
    sighting_pending: bool = False


@dataclass(frozen=True)
class PodAction:
    namespace: str
    name: str
    uid: str
    node: str
    reason: str
    claims: tuple[str, ...]  # the pod's RWO claims, "namespace/name"
    controller: str = ""  # "Kind/name" of its controller: what a replacement must belong to
    bound: tuple[tuple[str, str], ...] = ()  # (uid, PV) of each of `claims`, as proven: the recovery record's

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
    claim_uid: str = ""  # for the claim's Event: kubectl describe finds Events by uid
    uid: str = ""  # the attachment's, as judged: its delete's precondition


@dataclass(frozen=True)
class NodePlan:
    verdict: NodeVerdict
    pods: tuple[PodAction, ...] = ()
    attachments: tuple[AttachmentAction, ...] = ()
    add_taint: bool = False  # add the out-of-service taint before deleting anything
    taint_first: bool = False  # release no VolumeAttachment until the out-of-service taint is on, read live
    fence: str | None = None  # a fencing step still needed (fencing.REQUEST, PENDING, "failed"); None: go on
    fence_reason: str = ""
    # The NetworkFence the plan judged, (uid, resourceVersion): a write the plan decided on it (the delete that
    # recreates it) is preconditioned on exactly that object.
    fence_seen: tuple[str, str] = ("", "")
    # FENCING=redfish: (the REDFISH_BMC_FILE key, the node's systemUUID) as the plan judged them, the key unique
    # among the nodes; the BMC is asked only while the node, read live, still carries both. And another node that
    # reports the same systemUUID, or "": then a map entry that names its machine by uuid proves nothing.
    machine_seen: tuple[str, str, str] = ("", "", "")
    # The node's Lease as this pass first read it (its resourceVersion, "" when it had none): every live
    # re-check before a write compares, so a renewal the pass watches happen is seen as one.
    lease_seen: str = ""
    status_seen: datetime | None = None  # the node's status stamp the plan judged by (see judge_liveness)
    blocked: str = ""  # why nothing on this node is touched: something on it could not be read
    # The pods of `pods` tied to this node by nothing but their spec.nodeName (no volume of theirs attached
    # here): any tenant can make such pods, so they never count toward the brakes (planner/evidence.py).
    unproven: tuple[str, ...] = ()
    # The `attachments` made after this node died (a tenant's pod can have them made): released, never counted.
    unproven_attachments: tuple[str, ...] = ()

    @property
    def has_work(self) -> bool:
        return bool(self.pods or self.attachments or self.add_taint)

    @property
    def counted(self) -> bool:
        """Has work the brakes count, by evidence no tenant can write (planner/evidence.py): an attachment to
        release made while the node was alive, or a pod whose volume was attached here then, or that the
        node's kubelet ran. The out-of-service taint only ever comes with one of these or
        with unproven work, so it adds nothing."""
        return (any(a.name not in self.unproven_attachments for a in self.attachments)
                or any(p.key not in self.unproven for p in self.pods))


@dataclass(frozen=True)
class Skip:
    kind: str  # "node", "pod" or "volumeattachment"
    name: str
    reason: str


class RefusalKind(StrEnum):
    """Which brake refused the pass; split-brain is a node verdict, not a refusal of the whole pass."""

    UNHEALTHY_FRACTION = "unhealthy-fraction"
    NODES_PER_PASS = "nodes-per-pass"
    STORM_COOLDOWN = "storm-cooldown"  # a brake tripped, and STORM_COOLDOWN_SECONDS of calm have not passed


@dataclass(frozen=True)
class Refusal:
    kind: RefusalKind
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class StormMark:
    """A storm moment to write into the control object: `key` (TRIPPED_AT or CALM_SINCE) at `at`, the other
    key removed when a storm starts; preconditioned on `resource_version` ("" : create the object)."""

    key: str
    at: datetime
    resource_version: str


class UnsafePlan(Exception):
    """The brake refused the whole pass."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


@dataclass(frozen=True)
class Plan:
    verdicts: tuple[NodeVerdict, ...]
    nodes: tuple[NodePlan, ...]
    skips: tuple[Skip, ...]
    refusal: Refusal | None = None
    not_ready: int = 0
    total_nodes: int = 0
    untaint: tuple[str, ...] = ()  # recovered nodes whose out-of-service taint (ours) comes off
    # Our taint records (ConfigMap names) whose taint is gone (a human removed it, the Node object is gone)
    stale_records: tuple[TaintRecord, ...] = ()
    # our records of standing taints to write again, for nodes not Ready under them (taint.machines_now): memory,
    # written in a paused or refused pass too, never in a dry run
    rerecord: tuple[TaintRecord, ...] = ()
    refence: tuple[tuple[str, str, str], ...] = ()  # the same for our standing fences: (node, bootID, version)
    # Recovering nodes whose out-of-service taint stays until a human acts (not ours, or not rebooted), and why
    taint_kept: tuple[tuple[str, str], ...] = ()
    unfence: tuple[tuple[str, str], ...] = ()  # (node, fencing.UNFENCE or DELETE) for nodes back for good
    # (node, fencing.HELD_* kind, why): our fences on nodes back for good that are not ours to lift for them
    fences_held: tuple[tuple[str, str, str], ...] = ()
    recovery: tuple[Verdict, ...] = ()  # recovery.Verdict for each claim whose freed pod we still watch
    # The next moment (server clock) at which time alone changes what this plan decides: a node proven down,
    # an undo allowed, a recovery timed out. None when only a change in the cluster can.
    wake_at: datetime | None = None
    deferred: tuple[str, ...] = ()  # pods left for later passes by MAX_PODS_PER_PASS (planner/caps.py)
    judged_at: datetime | None = None  # the server's now the verdicts were judged at (the snapshot's)
    paused: Pause = NOT_PAUSED  # why this pass writes nothing (the switch, an unreadable control object): control.py
    storm_mark: StormMark | None = None  # a storm moment for act to record (control.py)
    ignored: tuple[tuple[str, str], ...] = ()  # (node, object) the brakes did not count (planner/evidence.py)
    # Down (or down but for this process's own sighting) with nothing counted to release: the unhealthy-fraction
    # brake leaves these nodes out of both sides of its ratio (planner/evidence.py's left_out).
    left_out: frozenset[str] = frozenset()

    @property
    def busy_nodes(self) -> tuple[NodePlan, ...]:
        """The nodes the nodes-per-pass brake counts."""
        return tuple(n for n in self.nodes if n.counted)

    @property
    def writes(self) -> bool:
        """Whether acting on this plan, were no brake in the way, writes anything but an Event: a fence, a taint,
        a pod or an attachment delete (counted by the brakes or not: every write is under them), an undo, a
        recovery record settled, a storm moment remembered. A pass judged from the watch cache re-reads live
        before any of these (run/runner.py)."""
        return bool(any(n.has_work for n in self.nodes) or self.untaint or self.stale_records or self.rerecord
                    or self.refence or self.unfence or self.storm_mark is not None
                    or any(getattr(v, "state", "") in SETTLING for v in self.recovery))

    @property
    def pod_count(self) -> int:
        return sum(len(n.pods) for n in self.nodes)

    @property
    def attachment_count(self) -> int:
        return sum(len(n.attachments) for n in self.nodes)

    @property
    def split_brain(self) -> tuple[NodeVerdict, ...]:
        return tuple(v for v in self.verdicts if v.state is NodeState.SPLIT_BRAIN)

    def raise_if_unsafe(self) -> None:
        if self.refusal:
            raise UnsafePlan(self.refusal)
