"""Our out-of-service taint on a node, by read-modify-write: added with our record of it, written ahead; removed,
with its record, only when undo's rule allows it on the node read live; a record whose taint is gone dropped."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from ..kube import Api, ApiError
from ..model import BadObject, Json, Node, TaintRecord
from ..model.event_reasons import Reason
from ..planner import NodePlan, lift_blocker, shutdown_taint
from ..planner.undo import UNDO_BMC
from ..settings import Settings
from .events import EventRecorder
from .node_taint import LANDED, Build, add_patch, read_modify_write, remove_patch
from .outcome import Outcome
from .power import PowerWitness
from .recheck import Rechecker
from .taint_records import TaintRecords
from .writer import Writer

log = logging.getLogger(__name__)


class OurTaint:
    def __init__(self, api: Api, settings: Settings, writer: Writer, *, events: EventRecorder, outcome: Outcome,
                 live: Rechecker, records: TaintRecords, power: PowerWitness, node_uids: dict[str, str],
                 now: Callable[[], datetime]) -> None:
        self.api, self.settings, self.writer, self.events, self.outcome = api, settings, writer, events, outcome
        self.live, self.records, self.power, self.node_uids, self.now = live, records, power, node_uids, now

    def add(self, node_plan: NodePlan, raw: Json, off_at: str) -> bool:
        """Add our taint with timeAdded `stamp`, after writing our record of it (write-ahead: a taint of ours never
        exists without the record that makes it ours)."""
        name, stamp = node_plan.verdict.node, self.events.stamp()

        def build(reread: bool) -> Build:
            nonlocal raw
            if reread:  # after a 409 someone changed the node: judge it again from scratch
                checked = self.live.confirm_down(node_plan)
                if checked is None:
                    return None
                live, raw = checked
                if live.our_taint is not None and live.oos_added_at == stamp:
                    return LANDED  # our own patch, whose answer was lost: it is there
            patch = add_patch(raw, stamp)
            if patch is None:
                log.info("out-of-service taint already present; not ours to manage", extra={"node": name})
                return None
            if not self.records.write_ahead(raw, stamp, off_at):
                return None
            return raw, patch

        with self.live.on_every_retry(node_plan):
            added = read_modify_write(self.writer, name, "add the out-of-service taint", build=build)
        if added:
            self.outcome.taints_added.append(name)
            log.info("added the out-of-service taint", extra={"node": name})
            self.events.node(name, self.node_uids.get(name, ""), "Normal", reason=Reason.OutOfServiceTaintAdded,
                             message="node proven down; added node.kubernetes.io/out-of-service=nodeshutdown:NoExecute "
                             "so Kubernetes force-detaches its volumes; rwo-failover removes it once the node is back "
                             "after a reboot")
        return added or self.settings.dry_run

    def refresh(self, node_plan: NodePlan, off_at: str) -> bool:
        """Before a release through our taint of an earlier outage: its record names the machine as read now
        (TaintRecords.refresh). True when nothing stands in the way of the release (no taint of ours: nothing to
        refresh)."""
        live = self.live.confirm_down(node_plan)
        if live is None:
            return False
        node, raw = live
        if node.our_taint is None or not node.taint_record.name:
            return True
        records = self.records.read(node, "re-check of our taint record before a release")  # now, never cached
        if records is None:
            return False
        node = Node.from_json(raw).with_record(records)  # the node as re-checked, with the record as read now
        if node.our_taint is None or not node.taint_record.name:
            return True  # the record is gone since: the taint is not ours to refresh
        return self.records.refresh(node.taint_record, raw, off_at)

    def remove(self, name: str) -> None:
        """Take our out-of-service taint off a node that is back after a reboot, and only ours, for the Node object
        we added it to; then our record of it."""
        added_at, boots, record = "", "", TaintRecord()

        def build(reread: bool) -> Build:
            nonlocal added_at, boots, record
            live = self.live.read_live(name, "re-check of a recovered node")
            if live is None:
                return None
            node, lease, raw = live
            self.node_uids[name] = node.uid
            ours = node.our_taint
            if reread and added_at and not any(t.is_ours and t.time_added == added_at for t in node.taints):
                return LANDED  # our removal landed and its answer was lost: the retry got 409, and the taint is gone
            blocker = "not ours" if ours is None else \
                "another shutdown taint" if shutdown_taint(node, self.settings.shutdown_taints) else \
                lift_blocker(node, lease, self.settings, now=self.now())[0]
            if not blocker and self.settings.undo == UNDO_BMC:  # the power cycle, as the BMC shows it now
                blocker = self.power.shows_on(node)
                blocker = f"UNDO=bmc: {blocker}" if blocker else None
            if blocker:
                log.info("out-of-service taint left in place", extra={"node": name, "reason": blocker})
                return None
            assert ours is not None  # else blocker is "not ours", and the patch is never built
            added_at, record = node.oos_added_at or "", node.taint_record
            boots = f"bootID {node.boot_id}, {node.taint_record.boot_id} when tainted"
            return raw, remove_patch(raw, ours)

        if read_modify_write(self.writer, name, "remove our out-of-service taint", build=build):
            self.records.remove(record)
            self.outcome.taints_removed.append(name)
            log.info("removed our out-of-service taint from a recovered node", extra={"node": name})
            self.events.node(name, self.node_uids.get(name, ""), "Normal", reason=Reason.OutOfServiceTaintRemoved,
                             message=f"node rebooted ({boots}) and Ready for {self.settings.recovery_seconds}s or more "
                             "with a fresh Lease; "
                             f"removed the node.kubernetes.io/out-of-service taint rwo-failover added at {added_at}")

    def drop(self, record: TaintRecord) -> None:
        """Our record outlived its taint (a human removed the taint, or the Node object is gone): drop it, so a
        later out-of-service taint of someone else's is never taken for ours. Its node is read again first."""
        try:
            raw = self.api.read_node(record.node)
        except ApiError as err:
            self.writer.fail(f"re-check of node {record.node} before dropping our taint record failed: {err}", err)
            return
        try:
            live = Node.from_json(raw) if isinstance(raw, dict) else None
        except BadObject as err:
            self.writer.fail(f"node {record.node} cannot be read before dropping our taint record ({err}); kept")
            return
        self.records.drop(record, live)

