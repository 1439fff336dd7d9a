"""What a pass reads of each kind, as msgspec Structs: decoding into these builds only the declared fields.

Every key not declared here (a tenant's `managedFields[].fieldsV1`, the pod spec's containers, anything a
newer API adds) is skipped by the decoder unbuilt, so a page costs what a pass keeps, not what tenants
wrote. Each Struct mirrors the fields its model type's `from_json` reads (rwo_failover/model/*.py): add a
field there, declare it here too (tests/test_decode.py checks every kind round-trips what from_json reads).

Only the containers from_json always reads are typed (an object, a list of objects); every value in them is
`Any`, judged by from_json exactly as before, because from_json reads some fields only in some entries (the
Ready condition's status, the controller reference's kind) and a stricter decoder would skip objects it
reads. A container of the wrong JSON type is a validation error, which kube/decode.py turns into one
unreadable object (from_json would have refused it too), never a failed list. An `Any` value is built whole,
but it is a value the API promises small (a label map, a volume's inline spec), within the object limit
and the page cap; nested past what msgspec decodes, it goes to decode's depth-bounded path.
"""

from __future__ import annotations

from typing import Any

import msgspec


class Shape(msgspec.Struct, omit_defaults=True):
    """Absent stays absent when converted back to JSON types (omit_defaults), as from_json expects."""




class Meta(Shape):
    name: Any = None
    namespace: Any = None
    uid: Any = None
    resourceVersion: Any = None  # where a watch resumes


class Stamp(Shape):  # a managedFields entry: its time and subresource only, never its fieldsV1
    time: Any = None
    subresource: Any = None


class Condition(Shape):
    type: Any = None
    status: Any = None
    lastTransitionTime: Any = None
    message: Any = None
    observedGeneration: Any = None


# --- Node ----------------------------------------------------------------------------------------------
class NodeMeta(Meta):
    labels: Any = None  # annotations are not read: the node's kubelet writes them, so they decide nothing
    managedFields: list[Stamp] | None = None


class Taint(Shape):
    key: Any = None
    value: Any = None
    effect: Any = None
    timeAdded: Any = None


class NodeSpec(Shape):
    taints: list[Taint] | None = None
    providerID: Any = None


class Address(Shape):
    type: Any = None
    address: Any = None


class NodeInfo(Shape):
    bootID: Any = None
    systemUUID: Any = None  # FENCING=redfish matches it to the BMC's ComputerSystem UUID


class NodeStatus(Shape):
    conditions: list[Condition] | None = None
    addresses: list[Address] | None = None
    nodeInfo: NodeInfo | None = None  # only bootID and systemUUID: the images, versions and the rest are skipped


class Node(Shape):
    metadata: NodeMeta | None = None
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


# --- Lease ---------------------------------------------------------------------------------------------
class LeaseMeta(Meta):
    managedFields: list[Stamp] | None = None


class LeaseSpec(Shape):
    renewTime: Any = None
    leaseDurationSeconds: Any = None


class Lease(Shape):
    metadata: LeaseMeta | None = None
    spec: LeaseSpec | None = None


# --- Pod -----------------------------------------------------------------------------------------------
class OwnerReference(Shape):
    controller: Any = None
    kind: Any = None
    name: Any = None


class PodMeta(Meta):
    labels: Any = None
    annotations: Any = None
    ownerReferences: list[OwnerReference] | None = None
    deletionTimestamp: Any = None


class ClaimSource(Shape):
    claimName: Any = None


class PodVolume(Shape):
    name: Any = None
    persistentVolumeClaim: ClaimSource | None = None
    ephemeral: Any = None


class PodSpec(Shape):
    nodeName: Any = None
    volumes: list[PodVolume] | None = None


class PodStatus(Shape):
    phase: Any = None
    startTime: Any = None  # the kubelet's alone: it ran the pod (planner/evidence.py)
    reason: Any = None
    conditions: list[Condition] | None = None


class Pod(Shape):
    metadata: PodMeta | None = None
    spec: PodSpec | None = None
    status: PodStatus | None = None


# --- PersistentVolumeClaim -----------------------------------------------------------------------------
class ClaimMeta(Meta):
    annotations: Any = None


class ClaimSpec(Shape):
    volumeName: Any = None


class Phase(Shape):
    phase: Any = None


class Claim(Shape):
    metadata: ClaimMeta | None = None
    spec: ClaimSpec | None = None
    status: Phase | None = None


# --- PersistentVolume ----------------------------------------------------------------------------------
class ClaimRef(Shape):
    namespace: Any = None
    name: Any = None
    uid: Any = None


class VolumeSpec(Shape):
    claimRef: ClaimRef | None = None
    accessModes: Any = None


class Volume(Shape):
    metadata: Meta | None = None
    spec: VolumeSpec | None = None


# --- VolumeAttachment ----------------------------------------------------------------------------------
class AttachmentMeta(Meta):
    deletionTimestamp: Any = None
    creationTimestamp: Any = None  # server-stamped: made while its node was alive or not (planner/evidence.py)


class AttachmentSource(Shape):
    persistentVolumeName: Any = None
    inlineVolumeSpec: Any = None


class AttachmentSpec(Shape):
    nodeName: Any = None
    source: AttachmentSource | None = None


class Attached(Shape):
    attached: Any = None


class Attachment(Shape):
    metadata: AttachmentMeta | None = None
    spec: AttachmentSpec | None = None
    status: Attached | None = None


# --- NetworkFence --------------------------------------------------------------------------------------
class FenceMeta(Meta):
    generation: Any = None
    labels: Any = None
    annotations: Any = None
    deletionTimestamp: Any = None


class FenceSpec(Shape):
    fenceState: Any = None
    cidrs: Any = None


class FenceStatus(Shape):
    result: Any = None
    message: Any = None
    conditions: list[Condition] | None = None


class Fence(Shape):
    metadata: FenceMeta | None = None
    spec: FenceSpec | None = None
    status: FenceStatus | None = None


# --- a recovery record (a ConfigMap in RECOVERY_NAMESPACE) ---------------------------------------------
class RecordData(Shape):
    record: Any = None  # parsed, and judged, by planner.recovery


class RecordMeta(Meta):
    annotations: Any = None  # a taint record's: an operator's word that the machine was power-cycled


class Record(Shape):
    metadata: RecordMeta | None = None
    data: RecordData | None = None


# --- the pause switch (a ConfigMap in RECOVERY_NAMESPACE; ours, tenants cannot write there) ------------------
class ControlStamp(Shape):  # model.control reads which manager's fieldsV1 owns data.<key>: small, ours
    manager: Any = None
    time: Any = None
    fieldsV1: Any = None


class ControlMeta(Meta):
    managedFields: list[ControlStamp] | None = None


class Control(Shape):
    metadata: ControlMeta | None = None
    data: Any = None


class Named(Shape):
    """Only the name: what a skip of an object that cannot be read calls it."""

    metadata: Meta | None = None
