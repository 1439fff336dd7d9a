"""Act: carry out a plan, node by node, after re-checking each node live.

Order per node, because the attach-detach controller re-creates a
VolumeAttachment whose pod still exists: force-delete the pods (with a UID
precondition), then delete the VolumeAttachments whose pods are all gone, then
record Events. Dry-run is checked here, at the point of change, and nowhere else.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Optional

from .client import Api, ApiError, Forbidden
from .config import Settings
from .decide import (AttachmentAction, NodePlan, NodeState, NodeVerdict, Plan, PodAction, judge, only_our_taint,
                     recovered, shutdown_taint)
from .model import OOS_ANNOTATION, OOS_KEY, Lease, Node

log = logging.getLogger("rwo_failover")
COMPONENT = "rwo-failover"
NODE_EVENT_NAMESPACE = "default"  # where kubelet and the node controller put Node events
OUT_OF_SERVICE = {"key": OOS_KEY, "value": "nodeshutdown", "effect": "NoExecute"}
PATCH_ATTEMPTS = 5  # read-modify-write rounds before giving up on a node that keeps changing under us


@dataclass
class Outcome:
    pods_deleted: list[str] = field(default_factory=list)
    pods_gone: list[str] = field(default_factory=list)
    pods_replaced: list[str] = field(default_factory=list)
    attachments_deleted: list[str] = field(default_factory=list)
    attachments_gone: list[str] = field(default_factory=list)
    attachments_held: list[str] = field(default_factory=list)
    nodes_not_down_on_recheck: list[str] = field(default_factory=list)
    split_brain: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    forbidden: list[str] = field(default_factory=list)
    taints_added: list[str] = field(default_factory=list)
    taints_removed: list[str] = field(default_factory=list)
    events: int = 0


class Actor:
    def __init__(self, api: Api, settings: Settings, now: Callable[[], datetime]) -> None:
        self.api, self.settings, self.now = api, settings, now
        self.outcome = Outcome()
        self.instance = socket.gethostname()

    def warn_split_brain(self, verdicts: tuple[NodeVerdict, ...]) -> None:
        for verdict in verdicts:
            self.outcome.split_brain.append(verdict.node)
            log.error("refusing node: tainted for shutdown but alive", extra={"node": verdict.node,
                      "taint": verdict.taint, "reason": verdict.reason})
            self._node_event(verdict.node, "Warning", "ShutdownTaintOnLiveNode",
                             f"{verdict.reason}; rwo-failover will not touch this node. "
                             f"Check the taint {verdict.taint}.")

    def record_refusal(self, plan: Plan) -> None:
        # One event per down node, capped, so a mass outage does not become an Event storm.
        down = [v for v in plan.verdicts if v.state is NodeState.DOWN][: self.settings.max_nodes_per_pass]
        for verdict in down:
            self._node_event(verdict.node, "Warning", "FailoverRefused", f"{plan.refusal}; nothing was deleted")

    def execute(self, plan: Plan) -> Outcome:
        plan.raise_if_unsafe()
        for node_plan in plan.nodes:
            if node_plan.has_work:
                self._act_on_node(node_plan)
        for name in plan.untaint:
            self._remove_taint(name)
        return self.outcome

    def _act_on_node(self, node_plan: NodePlan) -> None:
        name = node_plan.verdict.node
        checked = self._recheck(name)
        if checked is None:
            return
        verdict, raw = checked
        if verdict.state is not NodeState.DOWN:
            self.outcome.nodes_not_down_on_recheck.append(name)
            log.warning("node no longer proven down on live re-check; skipping it",
                        extra={"node": name, "state": verdict.state.value, "reason": verdict.reason})
            if verdict.state is NodeState.ALIVE:
                self.warn_split_brain((verdict,))
            return
        if node_plan.add_taint:
            # First, so the attach-detach controller force-detaches the moment each pod is gone.
            self._add_taint(name, raw)
        if not (node_plan.pods or node_plan.attachments):
            return
        gone = {p.key for p in node_plan.pods if self._delete_pod(p)}
        released = [a for a in node_plan.attachments if self._release(a, gone)]
        deleted = ", ".join(sorted(gone)) or "no pods"
        volumes = ", ".join(a.name for a in released) or "no VolumeAttachments"
        self._node_event(name, "Normal", "RWOVolumesReleased",
                         f"node proven down ({verdict.reason}, taint {verdict.taint}); force-deleted {deleted}; "
                         f"deleted {volumes}")

    def _read_live(self, name: str, purpose: str) -> Optional[tuple[Node, Optional[Lease], dict]]:
        """The node (also raw, for its resourceVersion) and its Lease, read now; None after recording why not."""
        try:
            raw = self.api.read_node(name)
            lease_raw = self.api.read_lease(name) if raw else None
        except ApiError as err:
            self._fail(f"{purpose} of node {name} failed: {err}", err)
            return None
        if raw is None:
            self._fail(f"node {name} disappeared before the {purpose}; skipped", None)
            return None
        return Node.from_json(raw), (Lease.from_json(lease_raw) if lease_raw else None), raw

    def _recheck(self, name: str) -> Optional[tuple[NodeVerdict, dict]]:
        """Judge the node again, live, with the same rule as the plan."""
        live = self._read_live(name, "re-check")
        if live is None:
            return None
        node, lease, raw = live
        taint = shutdown_taint(node, self.settings.shutdown_taints)
        if taint is None:
            return NodeVerdict(name, NodeState.NOT_YET, "", "shutdown taint removed since the pass began"), raw
        return judge(node, lease, taint, self.settings, self.now()), raw

    def _add_taint(self, name: str, raw: dict) -> None:
        if self.settings.dry_run:
            log.info("dry-run: would add the out-of-service taint", extra={"node": name, "taint": OUT_OF_SERVICE})
            return

        def build(reread: bool) -> Optional[tuple[dict, dict]]:
            nonlocal raw
            if reread:  # after a 409 someone changed the node: judge it again from scratch
                checked = self._recheck(name)
                if checked is None or checked[0].state is not NodeState.DOWN:
                    log.warning("node changed and is no longer proven down; out-of-service taint not added",
                                extra={"node": name})
                    return None
                raw = checked[1]
            taints = (raw.get("spec") or {}).get("taints") or []
            if any(t.get("key") == OOS_KEY for t in taints):
                log.info("out-of-service taint already present; not ours to manage", extra={"node": name})
                return None
            return raw, {"metadata": {"annotations": {OOS_ANNOTATION: self._stamp()}},
                         "spec": {"taints": taints + [dict(OUT_OF_SERVICE, timeAdded=self._stamp())]}}

        if self._read_modify_write(name, "adding the out-of-service taint", build):
            self.outcome.taints_added.append(name)
            log.info("added the out-of-service taint", extra={"node": name})
            self._node_event(name, "Normal", "OutOfServiceTaintAdded",
                             f"node proven down; added {OOS_KEY}=nodeshutdown:NoExecute so Kubernetes "
                             "force-detaches its volumes; rwo-failover removes it once the node is back")

    def _remove_taint(self, name: str) -> None:
        """Take our out-of-service taint (and annotation) off a node that is back, and only ours."""
        added_at = ""

        def build(_reread: bool) -> Optional[tuple[dict, dict]]:
            nonlocal added_at
            live = self._read_live(name, "re-check of a recovered node")
            if live is None:
                return None
            node, lease, raw = live
            if not only_our_taint(node, self.settings.shutdown_taints) or \
                    not recovered(node, lease, self.settings, self.now()):
                log.info("out-of-service taint left in place: not ours, or the node is not back for long enough",
                         extra={"node": name})
                return None
            if self.settings.dry_run:
                log.info("dry-run: would remove our out-of-service taint", extra={"node": name})
                return None
            added_at = node.oos_added_at or ""
            kept = [t for t in (raw.get("spec") or {}).get("taints") or () if t.get("key") != OOS_KEY]
            return raw, {"metadata": {"annotations": {OOS_ANNOTATION: None}}, "spec": {"taints": kept}}

        if self._read_modify_write(name, "removing the out-of-service taint", build):
            self.outcome.taints_removed.append(name)
            log.info("removed our out-of-service taint from a recovered node", extra={"node": name})
            self._node_event(name, "Normal", "OutOfServiceTaintRemoved",
                             f"node Ready for {self.settings.recovery_seconds}s or more with a fresh Lease; "
                             f"removed the {OOS_KEY} taint rwo-failover added at {added_at}")

    def _read_modify_write(self, name: str, what: str,
                           build: Callable[[bool], Optional[tuple[dict, dict]]]) -> bool:
        """Rounds of build (the node as read, and the merge patch to make; None to stop) and a patch carrying
        the read's resourceVersion, so a stale read gets 409 and never overwrites. True when a patch landed."""
        for attempt in range(PATCH_ATTEMPTS):
            built = build(attempt > 0)
            if built is None:
                return False
            raw, patch = built
            patch["metadata"]["resourceVersion"] = raw["metadata"]["resourceVersion"]
            try:
                self.api.patch_node(name, patch)
                return True
            except ApiError as err:
                if err.status != 409:
                    self._fail(f"{what} on node {name} failed: {err}", err)
                    return False
        self._fail(f"{what} on node {name}: still conflicting after {PATCH_ATTEMPTS} read-modify-write rounds", None)
        return False

    def _stamp(self) -> str:
        return self.now().strftime("%Y-%m-%dT%H:%M:%SZ")

    def _delete_pod(self, action: PodAction) -> bool:
        """True when the pod we inspected is gone (or would be, in a dry run)."""
        fields = {"pod": action.key, "uid": action.uid, "node": action.node, "reason": action.reason,
                  "claims": list(action.claims)}
        if self.settings.dry_run:
            log.info("dry-run: would force-delete pod", extra=fields)
            return True
        try:
            found = self.api.delete_pod(action.namespace, action.name, action.uid)
        except ApiError as err:
            if err.status == 409:
                self.outcome.pods_replaced.append(action.key)
                log.warning("pod was replaced since it was inspected (UID differs); left alone", extra=fields)
                return False
            self._fail(f"force-delete of pod {action.key} failed: {err}", err)
            return False
        finalizers = ((found or {}).get("metadata") or {}).get("finalizers")
        if finalizers:
            # Still there: the attach-detach controller would re-create any attachment we delete now.
            self._fail(f"pod {action.key} is held by finalizers {', '.join(finalizers)}; its volumes stay "
                       "attached until they are removed", None)
            return False
        (self.outcome.pods_deleted if found is not None else self.outcome.pods_gone).append(action.key)
        log.info("force-deleted pod" if found is not None else "pod already gone", extra=fields)
        self._event(action.namespace, "Pod", action.name, action.uid, "Normal", "ForceDeletedFromDeadNode",
                    f"{action.reason}; force-deleted by rwo-failover to release {', '.join(action.claims)}")
        return True

    def _release(self, action: AttachmentAction, gone: set[str]) -> bool:
        fields = {"volumeattachment": action.name, "node": action.node, "pv": action.volume, "claim": action.claim}
        waiting = sorted(set(action.after_pods) - gone)
        if waiting:
            self.outcome.attachments_held.append(action.name)
            log.warning("VolumeAttachment kept: its pod is not gone, and the controller would re-create it",
                        extra=dict(fields, waiting_for=waiting))
            return False
        if self.settings.dry_run:
            log.info("dry-run: would delete VolumeAttachment", extra=fields)
            return True
        try:
            found = self.api.delete_attachment(action.name)
        except ApiError as err:
            self._fail(f"delete of VolumeAttachment {action.name} failed: {err}", err)
            return False
        (self.outcome.attachments_deleted if found is not None else self.outcome.attachments_gone).append(action.name)
        log.info("deleted VolumeAttachment" if found is not None else "VolumeAttachment already gone", extra=fields)
        namespace, _, claim = action.claim.partition("/")
        self._event(namespace, "PersistentVolumeClaim", claim, None, "Normal", "VolumeReleasedFromDeadNode",
                    f"deleted VolumeAttachment {action.name} of PV {action.volume} on dead node {action.node}")
        return True

    def _node_event(self, node: str, kind: str, reason: str, message: str) -> None:
        self._event(NODE_EVENT_NAMESPACE, "Node", node, None, kind, reason, message, cluster_scoped=True)

    def _event(self, namespace: str, kind: str, name: str, uid: Optional[str], event_type: str, reason: str,
               message: str, cluster_scoped: bool = False) -> None:
        if self.settings.dry_run:
            return
        stamp = self._stamp()
        involved = {"apiVersion": "v1", "kind": kind, "name": name, "uid": uid,
                    "namespace": None if cluster_scoped else namespace}
        event = {"metadata": {"generateName": f"{name}.", "namespace": namespace},
                 "involvedObject": {k: v for k, v in involved.items() if v},
                 "type": event_type, "reason": reason, "message": message[:1024], "count": 1,
                 "firstTimestamp": stamp, "lastTimestamp": stamp,
                 "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
                 "reportingInstance": self.instance}
        try:
            self.api.create_event(namespace, event)
            self.outcome.events += 1
        except ApiError as err:
            self._fail(f"could not record {reason} Event on {kind} {name}: {err}", err)

    def _fail(self, message: str, err: Optional[ApiError]) -> None:
        (self.outcome.forbidden if isinstance(err, Forbidden) else self.outcome.failures).append(message)
        log.error(message)
