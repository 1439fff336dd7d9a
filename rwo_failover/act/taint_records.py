"""Our records of the out-of-service taints we add (model/taint_record.py), through the writer.

A record is written before its taint (write-ahead), so a taint of ours never exists without the record that
makes it ours; a record whose taint never landed is stale, and a later pass drops it. Each record is removed
after its taint comes off, or dropped once its taint is gone, and only the record as judged (a delete carries
its uid and resourceVersion), after its node was read again, live.

A node's record is read live with the node at each re-check before a write. The re-checks before each release on
a proven-down node may use a read less than RECORD_READ_SECONDS old (and never one from before a write of ours to
the record), a read per second of releasing instead of one per write: there the record only tells which
out-of-service taint is ours, and the node stays proven down by another. Every judgment the record itself decides
reads it now: lifting our taint, refreshing the record at a release, dropping it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..kube import Api, ApiError
from ..model import POWER_CYCLED_ANNOTATION, BadObject, Json, Node, TaintRecord, record_name
from .writer import Result, Writer

log = logging.getLogger(__name__)
RECORD_READ_SECONDS = 1.0  # how old a record read may be when it is used again for a re-check


def _record(obj: Json) -> TaintRecord | None:
    try:
        return TaintRecord.from_json(obj)
    except BadObject:
        return None  # unreadable: no taint is ours by it (and observe's list names it in a skip)


class TaintRecords:
    def __init__(self, api: Api, writer: Writer, namespace: str, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.api, self.writer, self.namespace, self.clock = api, writer, namespace, clock
        self._written: dict[str, TaintRecord] = {}  # what this pass wrote, by ConfigMap name
        # The last live read of each record, by ConfigMap name: when it was sent, and what it found.
        self._read: dict[str, tuple[float, dict[str, TaintRecord]]] = {}

    def read(self, node: Node, purpose: str, *, recent: bool = False) -> dict[str, TaintRecord] | None:
        """The record of this Node object read now, or with `recent` as read live less than RECORD_READ_SECONDS ago
        ({} when none, or unreadable); None once a failed read is recorded."""
        name = record_name(node.uid)
        last = self._read.get(name)
        if recent and last is not None and self.clock() - last[0] < RECORD_READ_SECONDS:
            return dict(last[1])
        sent = self.clock()  # the answer shows the record as it was at this moment or later
        try:
            found = [r for r in self.api.find_taint_record(self.namespace, name, _record) if r is not None]
        except ApiError as err:
            self.writer.fail(f"{purpose} of node {node.name}: reading its taint record failed: {err}", err)
            return None
        records = {r.name: r for r in found}
        self._read[name] = (sent, records)
        return dict(records)

    def _record_write(self, what: str, would: str, name: str, *, call: Callable[[], Json | None]) -> Result:
        """Every write of ours to a record: what was read of it before may no longer be what it holds."""
        self._read.pop(name, None)
        return self.writer.record(what, would, name, call=call)

    def write_ahead(self, raw_node: Json, added_at: str, bmc_off_at: str) -> bool:
        """Record the taint we are about to add, with timeAdded `added_at`, for the node as read (`raw_node`).
        True once it is recorded (or would be, in a dry run)."""
        record = TaintRecord.of(raw_node, added_at, bmc_off_at)
        if not record.node_uid:
            self.writer.fail(f"node {record.node}: read without a uid, so a record of our taint could not name it; "
                             "the out-of-service taint is not added")
            return False
        name = record_name(record.node_uid)
        if name in self._written and self._written[name].same_content(record):
            return True
        body = record.body(self.namespace)
        result = self._record_write(f"creating taint record {self.namespace}/{name}",
                                    "would record the out-of-service taint", name,
                                    call=lambda: self.api.create_taint_record(self.namespace, body))
        if result is Result.CONFLICT:  # a record of an earlier taint of ours, gone since (add_patch saw none)
            result = self._replace(record, name)
        if result in (Result.DONE, Result.WOULD):
            self._written[name] = record
            return True
        return False

    def _replace(self, record: TaintRecord, name: str) -> Result:
        try:
            found = self.api.find_taint_record(self.namespace, name, lambda obj: obj)
        except ApiError as err:
            self.writer.fail(f"replacing the taint record {name}: reading it failed: {err}", err)
            return Result.FAILED
        version = str((found[0].get("metadata") or {}).get("resourceVersion") or "") if found else ""
        if not version:
            self.writer.fail(f"replacing the taint record {name}: it cannot be read back to precondition the write")
            return Result.FAILED
        # A new taint, a new outage: an operator's word given for the record's earlier one does not carry over.
        result = self._overwrite(name, version, record, what=f"replacing taint record {self.namespace}/{name}",
                                 would="would record the out-of-service taint")
        if result is Result.CONFLICT:
            self.writer.fail(f"replacing the taint record {name}: it changed while we wrote it; the out-of-service "
                             "taint is not added in this pass")
            return Result.FAILED
        return result

    def rewrite(self, record: TaintRecord) -> Result:
        """Write `record` over the one it was read as (its version the precondition), without an operator's word:
        the plan's record of a standing taint on a node not Ready now (planner.taint.machines_now)."""
        result = self._overwrite(record.name, record.version, record,
                                 what=f"recording the machine under our taint {self.namespace}/{record.name}",
                                 would="would record the machine under our taint")
        if result is Result.CONFLICT:
            log.warning("taint record changed since it was read; the next pass records the machine",
                        extra={"record": record.name})
        return result

    def refresh(self, record: TaintRecord, raw_node: Json, bmc_off_at: str) -> bool:
        """Our taint stands from an earlier outage and this pass releases through it: the record must name the
        machine as it is at this release (its bootID and addresses now; with FENCING=redfish, this pass's Off), so
        undo waits for a reboot after the last release, never after the first. An operator's word on the record
        was given before this release and does not carry over. True once it names the machine as it is now."""
        current = TaintRecord.of(raw_node, record.added_at, bmc_off_at or record.bmc_off_at)
        if current.same_content(record) and not record.acknowledged:
            return True
        result = self._overwrite(record.name, record.version, current,
                                 what=f"refreshing taint record {self.namespace}/{record.name} for this release",
                                 would="would record the machine as it is at this release")
        if result is Result.CONFLICT:
            self.writer.fail(f"refreshing the taint record {record.name}: it changed since it was read; nothing on "
                             f"node {record.node} is released in this pass")
        return result in (Result.DONE, Result.WOULD)

    def _overwrite(self, name: str, version: str, record: TaintRecord, *, what: str, would: str) -> Result:
        """Write `record` into the ConfigMap `name` as read at `version` (CONFLICT when it changed since), without
        an operator's word: one given before does not carry over to what the record now says."""
        patch = {"metadata": {"resourceVersion": version, "annotations": {POWER_CYCLED_ANNOTATION: None}},
                 "data": record.data()}
        return self._record_write(what, would, name,
                                  call=lambda: self.api.patch_taint_record(self.namespace, name, patch))

    def _delete(self, record: TaintRecord) -> Result:
        """Preconditioned on the record judged: CONFLICT when it was written again since."""
        return self._record_write(f"deleting taint record {self.namespace}/{record.name}",
                                  "would delete the taint record", record.name,
                                  call=lambda: self.api.delete_taint_record(self.namespace, record.name, record.uid,
                                                                            resource_version=record.version))

    def remove(self, record: TaintRecord) -> None:
        """Our taint came off: its record goes too (a failure leaves it stale, for a later pass to drop)."""
        result = self._delete(record)
        if result is Result.CONFLICT:
            log.warning("taint record changed since it was read; left for a later pass",
                        extra={"record": record.name})

    def drop(self, record: TaintRecord, live: Node | None) -> bool:
        """Drop a record whose taint is gone, judged again on its node as read now (`live`, None when the node is
        gone): kept when the node still carries the recorded taint. True when it was dropped."""
        if live is not None and live.uid == record.node_uid and \
                any(t.is_ours and t.time_added == record.added_at for t in live.taints):
            log.info("taint record kept: its taint is on the node after all", extra={"record": record.name})
            return False
        result = self._delete(record)
        if result is Result.DONE:
            log.info("dropped our taint record: its taint is gone", extra={"record": record.name,
                                                                          "node": record.node})
        return result in (Result.DONE, Result.GONE, Result.WOULD)
