"""A Node, and its taints: what liveness, the brakes and the out-of-service taint read."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Optional

from .bounded import MAX_NODE_ADDRESSES_NOTE, boot_id_note, note
from .fields import Json, items_at, obj_at, ready_condition, server_time, strings_at, text_at
from .names import (APPLIED_BY, NODE_OPT_OUT_LABEL, OOS_ANNOTATION, OOS_APPLIED_BY, OUT_OF_SERVICE_KEY,
                    OUT_OF_SERVICE_VALUE, TAINT_ADDRESSES, TAINT_BOOT_ID, TAINT_NODE_UID)

SHUTTING_DOWN = "node is shutting down"  # kubelet nodeshutdown manager's ShutdownStatus(), in Ready's message


def _ready_message(status: Json) -> str:
    return next((text_at(c, "message") for c in items_at(status, "conditions") if text_at(c, "type") == "Ready"), "")


def _addresses(status: Json) -> str:
    """status.addresses as type=address, comma-separated, in the kubelet's order."""
    return ",".join(f"{text_at(a, 'type')}={text_at(a, 'address')}" for a in items_at(status, "addresses"))


def machine_of(obj: Json) -> dict[str, str]:
    """The machine a Node object stands for now, as the annotations we record with our taint: the object's uid,
    the kubelet's bootID (a new one at every boot) and the addresses, each bounded as model.bounded records what
    others wrote (7,000 addresses, whole, made our taint patch too big: refused on every pass; so did 560 next to
    others' 245 KiB of annotations)."""
    meta, status = obj_at(obj, "metadata"), obj_at(obj, "status")
    return {OOS_APPLIED_BY: APPLIED_BY, TAINT_NODE_UID: text_at(meta, "uid"),
            TAINT_BOOT_ID: boot_id_note(text_at(obj_at(status, "nodeInfo"), "bootID")),
            TAINT_ADDRESSES: note(_addresses(status), MAX_NODE_ADDRESSES_NOTE)}


@dataclass(frozen=True)
class TaintRecord:
    """What our annotations say about the out-of-service taint: who added it, for which machine."""
    applied_by: str = ""
    node_uid: str = ""
    boot_id: str = ""
    addresses: str = ""

    @classmethod
    def from_annotations(cls, annotations: dict[str, str]) -> "TaintRecord":
        return cls(annotations.get(OOS_APPLIED_BY, ""), annotations.get(TAINT_NODE_UID, ""),
                   annotations.get(TAINT_BOOT_ID, ""), annotations.get(TAINT_ADDRESSES, ""))


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
    # When the node itself (not its status) last changed, on the server's clock: its taints are written there.
    # A Lease renewal after it is the kubelet heartbeating while tainted for shutdown (planner.liveness).
    spec_written_at: Optional[datetime] = None
    opted_out: bool = False  # labelled NODE_OPT_OUT_LABEL (any value but "false"): never judged nor acted on
    boot_id: str = ""  # status.nodeInfo.bootID: the kubelet's boot of the machine; recorded on our fences
    labels: tuple[tuple[str, str], ...] = ()  # sorted (key, value): FENCING=redfish may key its BMC map by one
    taint_record: TaintRecord = TaintRecord()  # our annotations: who added our taint, for which machine
    # status.nodeInfo.systemUUID: the kubelet's SMBIOS product_uuid, what FENCING=redfish matches to the BMC's
    # ComputerSystem UUID (a node name can be re-registered on another machine; this cannot).
    system_uuid: str = ""

    def label(self, key: str) -> Optional[str]:
        return dict(self.labels).get(key)

    @property
    def marked(self) -> bool:
        """It carries a taint or our annotation: without either no verdict can be given (but FENCING=redfish's
        on a silent node), and most nodes in most passes have neither."""
        return bool(self.taints or self.oos_added_at)

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
        annotations = strings_at(meta, "annotations")
        ready, since = ready_condition(status)
        taints = tuple(Taint(text_at(t, "key"), text_at(t, "value"), text_at(t, "effect"), text_at(t, "timeAdded"))
                       for t in items_at(spec, "taints"))
        ips = tuple(text_at(a, "address") for a in items_at(status, "addresses")
                    if text_at(a, "type") == "InternalIP" and text_at(a, "address"))
        return cls(text_at(meta, "name"), taints, ready, since, annotations.get(OOS_ANNOTATION),
                   text_at(meta, "uid"), text_at(spec, "providerID"), ips,
                   server_time(meta, "status"), ready == "False" and SHUTTING_DOWN in _ready_message(status),
                   server_time(meta, ""),
                   strings_at(meta, "labels").get(NODE_OPT_OUT_LABEL, "false") != "false",
                   text_at(obj_at(status, "nodeInfo"), "bootID"),
                   tuple(sorted(strings_at(meta, "labels").items())),
                   TaintRecord.from_annotations(annotations),
                   text_at(obj_at(status, "nodeInfo"), "systemUUID"))
