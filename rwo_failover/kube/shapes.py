"""What a pass reads of each kind, as msgspec Structs: decoding into these builds only the declared fields.

Every key not declared here (a tenant's `managedFields[].fieldsV1`, the pod spec's containers, anything a
newer API adds) is skipped by the decoder unbuilt, so a page costs what a pass keeps, not what tenants
wrote. Each Struct mirrors the fields its model type's `from_json` reads (rwo_failover/model/*.py): add a
field there, declare it here too (tests/test_decode.py checks every kind round-trips what from_json reads).

Every field is optional and null means absent, as `model.fields` reads them; a value of another JSON type is
a validation error, which kube/decode.py turns into one unreadable object, never a failed list.
"""

from __future__ import annotations

from typing import Any, Optional

import msgspec


class Shape(msgspec.Struct, omit_defaults=True):
    """Absent stays absent when converted back to JSON types (omit_defaults), as from_json expects."""


class Present(msgspec.Struct):  # not omit_defaults: its one field must come back
    """An object whose presence alone is read (a pod's ephemeral volume, an attachment's inline spec): its
    content is skipped, and it reads back as a non-empty object (from_json tests `bool(...)`)."""

    seen: bool = msgspec.field(default=True, name="rwo-failover.io/present")  # no API field has this name


Strings = Optional[dict[str, str]]


class Meta(Shape):
    name: Optional[str] = None
    namespace: Optional[str] = None
    uid: Optional[str] = None
    resourceVersion: Optional[str] = None  # where a watch resumes


class Stamp(Shape):  # a managedFields entry: its time and subresource only, never its fieldsV1
    time: Optional[str] = None
    subresource: Optional[str] = None


class Condition(Shape):
    type: Optional[str] = None
    status: Optional[str] = None
    lastTransitionTime: Optional[str] = None
    message: Optional[str] = None
    observedGeneration: Optional[int] = None


# --- Node ----------------------------------------------------------------------------------------------
class NodeMeta(Meta):
    labels: Strings = None
    annotations: Strings = None
    managedFields: Optional[list[Stamp]] = None


class Taint(Shape):
    key: Optional[str] = None
    value: Optional[str] = None
    effect: Optional[str] = None
    timeAdded: Optional[str] = None


class NodeSpec(Shape):
    taints: Optional[list[Taint]] = None
    providerID: Optional[str] = None


class Address(Shape):
    type: Optional[str] = None
    address: Optional[str] = None


class NodeStatus(Shape):
    conditions: Optional[list[Condition]] = None
    addresses: Optional[list[Address]] = None


class Node(Shape):
    metadata: Optional[NodeMeta] = None
    spec: Optional[NodeSpec] = None
    status: Optional[NodeStatus] = None


# --- Lease ---------------------------------------------------------------------------------------------
class LeaseMeta(Meta):
    managedFields: Optional[list[Stamp]] = None


class LeaseSpec(Shape):
    renewTime: Optional[str] = None
    leaseDurationSeconds: Optional[int] = None


class Lease(Shape):
    metadata: Optional[LeaseMeta] = None
    spec: Optional[LeaseSpec] = None


# --- Pod -----------------------------------------------------------------------------------------------
class OwnerReference(Shape):
    controller: Optional[bool] = None
    kind: Optional[str] = None
    name: Optional[str] = None


class PodMeta(Meta):
    labels: Strings = None
    annotations: Strings = None
    ownerReferences: Optional[list[OwnerReference]] = None
    deletionTimestamp: Optional[str] = None


class ClaimSource(Shape):
    claimName: Optional[str] = None


class PodVolume(Shape):
    name: Optional[str] = None
    persistentVolumeClaim: Optional[ClaimSource] = None
    ephemeral: Optional[Present] = None


class PodSpec(Shape):
    nodeName: Optional[str] = None
    volumes: Optional[list[PodVolume]] = None


class PodStatus(Shape):
    phase: Optional[str] = None
    reason: Optional[str] = None
    conditions: Optional[list[Condition]] = None


class Pod(Shape):
    metadata: Optional[PodMeta] = None
    spec: Optional[PodSpec] = None
    status: Optional[PodStatus] = None


# --- PersistentVolumeClaim -----------------------------------------------------------------------------
class ClaimMeta(Meta):
    annotations: Strings = None


class ClaimSpec(Shape):
    volumeName: Optional[str] = None


class Phase(Shape):
    phase: Optional[str] = None


class Claim(Shape):
    metadata: Optional[ClaimMeta] = None
    spec: Optional[ClaimSpec] = None
    status: Optional[Phase] = None


# --- PersistentVolume ----------------------------------------------------------------------------------
class ClaimRef(Shape):
    namespace: Optional[str] = None
    name: Optional[str] = None
    uid: Optional[str] = None


class VolumeSpec(Shape):
    claimRef: Optional[ClaimRef] = None
    accessModes: Optional[list[str]] = None


class Volume(Shape):
    metadata: Optional[Meta] = None
    spec: Optional[VolumeSpec] = None


# --- VolumeAttachment ----------------------------------------------------------------------------------
class AttachmentMeta(Meta):
    deletionTimestamp: Optional[str] = None


class AttachmentSource(Shape):
    persistentVolumeName: Optional[str] = None
    inlineVolumeSpec: Optional[Present] = None


class AttachmentSpec(Shape):
    nodeName: Optional[str] = None
    source: Optional[AttachmentSource] = None


class Attached(Shape):
    attached: Optional[bool] = None


class Attachment(Shape):
    metadata: Optional[AttachmentMeta] = None
    spec: Optional[AttachmentSpec] = None
    status: Optional[Attached] = None


# --- NetworkFence --------------------------------------------------------------------------------------
class FenceMeta(Meta):
    generation: Optional[int] = None
    labels: Strings = None
    annotations: Strings = None
    deletionTimestamp: Optional[str] = None


class FenceSpec(Shape):
    fenceState: Optional[str] = None
    cidrs: Optional[list[str]] = None


class FenceStatus(Shape):
    result: Optional[str] = None
    message: Optional[str] = None
    conditions: Optional[list[Condition]] = None


class Fence(Shape):
    metadata: Optional[FenceMeta] = None
    spec: Optional[FenceSpec] = None
    status: Optional[FenceStatus] = None


# --- a recovery record (a ConfigMap in RECOVERY_NAMESPACE) ---------------------------------------------
class RecordData(Shape):
    record: Any = None  # parsed, and judged, by planner.recovery


class Record(Shape):
    metadata: Optional[Meta] = None
    data: Optional[RecordData] = None


class Named(Shape):
    """Only the name: what a skip of an object that cannot be read calls it."""

    metadata: Optional[Meta] = None
