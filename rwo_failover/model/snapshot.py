"""What one pass read: the Snapshot the planner judges, and what could not be read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

from .attachment import Attachment
from .claim import Claim
from .control import Control
from .fence import Fence
from .lease import Lease
from .node import Node
from .pod import Pod
from .recovery import RecoveryEntry
from .taint_record import TaintRecord
from .volume import Volume


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
    leases: Mapping[str, Lease | None] = field(default_factory=dict)
    pods: tuple[Pod, ...] = ()
    claims: Mapping[str, Claim] = field(default_factory=dict)  # keyed "namespace/name"
    attachments: tuple[Attachment, ...] = ()
    volumes: Mapping[str, Volume] = field(default_factory=dict)  # PVs of the claims read, and of attachments
    server_version: tuple[int, int] | None = None  # read only when OUT_OF_SERVICE_TAINT=auto needs it
    fences: Mapping[str, Fence] = field(default_factory=dict)  # NetworkFences by node, when FENCING=networkfence
    # Recovery confirmation: our records; the pods that may be the replacements (and the freed pods, if still
    # there); in `claims`, `volumes` and `attachments` (whatever node) their claims, PVs and attachments.
    recovery_records: tuple[RecoveryEntry, ...] = ()
    recovery_pods: tuple[Pod, ...] = ()
    unreadable: tuple[Unreadable, ...] = ()  # objects skipped because they could not be read
    control: Control | None = None  # the control ConfigMap; None when there is none (not paused)
    control_error: str = ""  # why it could not be read: a pass then writes nothing (fail safe)
    # Our records of the out-of-service taints we added, by ConfigMap name; each node in `nodes` is bound to its
    # own already (Node.with_record).
    taint_records: Mapping[str, TaintRecord] = field(default_factory=dict)
    # How long this process itself has seen each Ready=Unknown node so (observe/sightings.py), in seconds: the
    # NotReady wait holds on it too. A node missing from it has not been seen at all (0).
    unknown_for: Mapping[str, float] = field(default_factory=dict)
    # How long this process has seen each Lease read at its current version, in seconds (FENCING=redfish's silence).
    lease_seen_for: Mapping[str, float] = field(default_factory=dict)

    # Both computed once per snapshot: a pass from continuous mode's cache at 5,000 nodes swept every node a
    # dozen times, which made a pass a second (a flapping shutdown taint) cost 5% of a core (bench/storms.py).
    @cached_property
    def by_name(self) -> Mapping[str, Node]:
        """The nodes by name."""
        return {n.name: n for n in self.nodes}

    @cached_property
    def marked(self) -> tuple[Node, ...]:
        """The nodes with a taint, our annotation or a NetworkFence: the only ones a verdict can be given
        (but FENCING=redfish's, which asks about silent nodes whatever they carry). Most nodes carry none."""
        return tuple(n for n in self.nodes if n.marked or n.name in self.fences)


@dataclass(frozen=True)
class Cached:
    """What a pass takes from continuous mode's watches (kube.cache) instead of listing: the same slim objects a
    list gives, and the objects the watches could not read, each an Unreadable as a list's would be."""

    nodes: tuple[Node, ...]
    fences: tuple[Fence, ...]
    recovery_records: tuple[RecoveryEntry, ...]
    unreadable: tuple[Unreadable, ...]
    control: Control | None = None  # the watched control ConfigMap, as the last event left it
    control_error: str = ""
    taint_records: tuple[TaintRecord, ...] = ()
