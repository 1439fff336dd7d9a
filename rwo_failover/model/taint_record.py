"""Our record of an out-of-service taint we added: a ConfigMap in RECOVERY_NAMESPACE, one per Node object.

It says who added the taint (we did: nobody else writes there), when (the taint's own timeAdded) and for which
machine (the Node's uid, its bootID and addresses then, and with FENCING=redfish when its BMC answered Off).
It lives where the accused node cannot write: under NodeRestriction a kubelet may write every annotation on its
own Node, but neither its taints nor anything in our namespace. So a taint is ours only when the node carries it
with the timeAdded of a record for that very Node object; nothing the node writes about itself can make a
human's taint look ours, nor ours look lifted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .bounded import MAX_NODE_ADDRESSES_NOTE, boot_id_note, note
from .fields import BadObject, Json, items_at, obj_at, strings_at, text_at
from .names import POWER_CYCLED_ANNOTATION, TAINT_RECORD_LABEL

RECORD_PREFIX = "rwo-taint-"  # then the Node's uid: one record per Node object, never keyed by a reusable name


def record_name(node_uid: str) -> str:
    return RECORD_PREFIX + node_uid


def _addresses(status: Json) -> str:
    """status.addresses as type=address, comma-separated, in the kubelet's order."""
    return ",".join(f"{text_at(a, 'type')}={text_at(a, 'address')}" for a in items_at(status, "addresses"))


@dataclass(frozen=True)
class TaintRecord:
    """Who added our out-of-service taint, when, and for which machine, as stored in our namespace."""

    node: str = ""  # the node's name, as written: the record is found by the Node's uid
    node_uid: str = ""
    boot_id: str = ""  # status.nodeInfo.bootID when we added the taint (boot_id_note)
    addresses: str = ""  # status.addresses then, as type=address (note, bounded)
    added_at: str = ""  # the timeAdded we wrote on the taint: the taint of this record, exactly
    bmc_off_at: str = ""  # FENCING=redfish: the API server's time when the machine's BMC answered Off
    name: str = ""  # the ConfigMap's name and resourceVersion, as read: a drop is preconditioned on them
    version: str = ""
    uid: str = ""
    acknowledged: bool = False  # POWER_CYCLED_ANNOTATION on it: an operator's word for this outage (UNDO=operator)

    @classmethod
    def of(cls, raw_node: Json, added_at: str, bmc_off_at: str = "") -> TaintRecord:
        """The record for a node as read now (its raw JSON), about to be tainted with timeAdded `added_at`."""
        meta, status = obj_at(raw_node, "metadata"), obj_at(raw_node, "status")
        return cls(text_at(meta, "name"), text_at(meta, "uid"),
                   boot_id_note(text_at(obj_at(status, "nodeInfo"), "bootID")),
                   note(_addresses(status), MAX_NODE_ADDRESSES_NOTE), added_at, bmc_off_at)

    @classmethod
    def from_json(cls, obj: Json) -> TaintRecord:
        """A record as stored; BadObject when it cannot be read (then no taint is ours by it)."""
        meta = obj_at(obj, "metadata")
        text = obj_at(obj, "data").get("record")
        if not isinstance(text, str):
            raise BadObject("data.record is not a string")
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            raise BadObject("data.record is not JSON") from None
        if not isinstance(data, dict):
            raise BadObject("data.record is not a JSON object")
        found = cls(text_at(data, "node"), text_at(data, "nodeUID"), text_at(data, "bootID"),
                    text_at(data, "addresses"), text_at(data, "addedAt"), text_at(data, "bmcOffAt"),
                    text_at(meta, "name"), text_at(meta, "resourceVersion"), text_at(meta, "uid"),
                    strings_at(meta, "annotations").get(POWER_CYCLED_ANNOTATION) == "true")
        if not (found.node and found.node_uid and found.added_at) or found.name != record_name(found.node_uid):
            raise BadObject("data.record names no node, Node uid and time added, or another Node object than the "
                            "ConfigMap's name")
        return found

    def data(self) -> dict[str, str]:
        record = {"node": self.node, "nodeUID": self.node_uid, "bootID": self.boot_id,
                  "addresses": self.addresses, "addedAt": self.added_at, "bmcOffAt": self.bmc_off_at}
        return {"record": json.dumps(record, sort_keys=True)}

    def body(self, namespace: str) -> dict[str, Any]:
        """The ConfigMap that stores it."""
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": record_name(self.node_uid), "namespace": namespace,
                             "labels": {TAINT_RECORD_LABEL: "true"}},
                "data": self.data()}

    def same_content(self, other: TaintRecord) -> bool:
        return self.data() == other.data()


def record_for(name: str, uid: str, added: Iterable[str], *, records: Mapping[str, TaintRecord]
               ) -> TaintRecord | None:
    """The record of the Node object `uid` named `name`; else the record of another Node object under that name
    whose taint this one carries (a Node re-created with its taints), so the plan can say whose taint it is; None
    when there is none. `added` are the timeAdded of the node's taints; `records` is keyed by ConfigMap name."""
    found = records.get(record_name(uid)) if uid else None
    if found is not None and found.node == name:
        return found
    times = set(added)
    return next((r for r in sorted(records.values(), key=lambda r: r.name)
                 if r.node == name and r.added_at in times), None)
