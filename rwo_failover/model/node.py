"""A Node, and its taints: what liveness, the brakes and the out-of-service taint read."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from .fields import Json, items_at, obj_at, ready_condition, server_time, strings_at, text_at
from .names import NODE_OPT_OUT_LABEL, OUT_OF_SERVICE_KEY, OUT_OF_SERVICE_VALUE
from .taint_record import TaintRecord, record_for

SHUTTING_DOWN = "node is shutting down"  # kubelet nodeshutdown manager's ShutdownStatus(), in Ready's message


def _ready_message(status: Json) -> str:
    return next((text_at(c, "message") for c in items_at(status, "conditions") if text_at(c, "type") == "Ready"), "")


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
    ready: str | None = None  # "True", "False", "Unknown", or None when never reported
    # The Ready condition's lastTransitionTime: the kubelet's clock for True and False, the node lifecycle
    # controller's for Unknown. Shown, and judged only after its skew is bounded (planner.nodes).
    ready_since: datetime | None = None
    # When we added our out-of-service taint (its timeAdded), from our record of it (model/taint_record.py),
    # never from the Node itself: bound by observe and the live re-checks (with_record).
    oos_added_at: str | None = None
    uid: str = ""  # for fencing: the webhook is told exactly which Node object
    provider_id: str = ""
    internal_ips: tuple[str, ...] = ()  # status.addresses of type InternalIP: what a NetworkFence cuts off
    # When its status last changed, on the server's clock (managedFields): for Ready=Unknown, when the node
    # lifecycle controller marked it, or later.
    status_written_at: datetime | None = None
    # The kubelet says it is shutting down gracefully (Ready=False, "node is shutting down", from the kubelet's
    # node shutdown manager): it renews its Lease for its grace period, then stops.
    shutting_down: bool = False
    # When the node itself (not its status) last changed, on the server's clock: its taints are written there.
    # A Lease renewal after it is the kubelet heartbeating while tainted for shutdown (planner.liveness).
    spec_written_at: datetime | None = None
    opted_out: bool = False  # labelled NODE_OPT_OUT_LABEL (any value but "false"): never judged nor acted on
    boot_id: str = ""  # status.nodeInfo.bootID: the kubelet's boot of the machine; recorded on our fences
    labels: tuple[tuple[str, str], ...] = ()  # sorted (key, value): FENCING=redfish may key its BMC map by one
    taint_record: TaintRecord = TaintRecord()  # our record of our taint (with_record): for which machine
    # status.nodeInfo.systemUUID: the kubelet's SMBIOS product_uuid, what FENCING=redfish matches to the BMC's
    # ComputerSystem UUID (a node name can be re-registered on another machine; this cannot).
    system_uuid: str = ""

    def with_record(self, records: Mapping[str, TaintRecord]) -> Node:
        """This node with our record of its out-of-service taint, if we hold one (records by ConfigMap name)."""
        found = record_for(self.name, self.uid, (t.time_added for t in self.taints if t.is_ours), records=records) \
            if records else None
        if found is None:
            return self
        return dataclasses.replace(self, oos_added_at=found.added_at, taint_record=found)

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)

    @property
    def marked(self) -> bool:
        """It carries a taint or our record: without either no verdict can be given (but FENCING=redfish's
        on a silent node), and most nodes in most passes have neither."""
        return bool(self.taints or self.oos_added_at)

    @property
    def has_oos_taint(self) -> bool:
        return any(t.key == OUT_OF_SERVICE_KEY for t in self.taints)

    @property
    def our_taint(self) -> Taint | None:
        """Our out-of-service taint: exactly what we write, with the timeAdded our taint record holds.

        A human who removed our taint leaves our record; a taint they add later has another timeAdded (or none),
        so it is never taken for ours.
        """
        if not self.oos_added_at:
            return None
        return next((t for t in self.taints if t.is_ours and t.time_added == self.oos_added_at), None)

    @classmethod
    def from_json(cls, obj: Json) -> Node:
        meta, spec, status = obj_at(obj, "metadata"), obj_at(obj, "spec"), obj_at(obj, "status")
        ready, since = ready_condition(status)
        taints = tuple(Taint(text_at(t, "key"), text_at(t, "value"), text_at(t, "effect"), text_at(t, "timeAdded"))
                       for t in items_at(spec, "taints"))
        ips = tuple(text_at(a, "address") for a in items_at(status, "addresses")
                    if text_at(a, "type") == "InternalIP" and text_at(a, "address"))
        return cls(text_at(meta, "name"), taints, ready, since, None,
                   text_at(meta, "uid"), text_at(spec, "providerID"), ips,
                   server_time(meta, "status"), ready == "False" and SHUTTING_DOWN in _ready_message(status),
                   server_time(meta, ""),
                   strings_at(meta, "labels").get(NODE_OPT_OUT_LABEL, "false") != "false",
                   text_at(obj_at(status, "nodeInfo"), "bootID"),
                   tuple(sorted(strings_at(meta, "labels").items())),
                   TaintRecord(),
                   text_at(obj_at(status, "nodeInfo"), "systemUUID"))
