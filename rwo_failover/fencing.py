"""Carrying out fencing steps: NetworkFence objects (csi-addons) or the fence webhook, through the writer.

The rules (when to fence, when to unfence) are in planner/fencing.py; this module does what they decide.
"""

from __future__ import annotations

import logging
from typing import Callable

from . import fence_webhook
from .client import Api
from .config import Settings
from .events import EventRecorder
from .model import FENCE_LABEL, Node
from .outcome import Outcome
from .planner.fencing import DELETE, PENDING, REFENCE, REQUEST, UNFENCE
from .planner.types import NodePlan
from .writer import Result, Writer

log = logging.getLogger("rwo_failover")
NETWORK_FENCE_API = "csiaddons.openshift.io/v1alpha1"


def cidrs(node: Node) -> list[str]:
    return [f"{ip}/128" if ":" in ip else f"{ip}/32" for ip in node.internal_ips]


class Fencer:
    def __init__(self, api: Api, settings: Settings, writer: Writer, events: EventRecorder, outcome: Outcome,
                 sleep: Callable[[float], None]) -> None:
        self.api, self.settings, self.writer, self.events = api, settings, writer, events
        self.outcome, self.sleep = outcome, sleep

    def ensure(self, node_plan: NodePlan, node: Node) -> bool:
        """True when the node is confirmed fenced now, so its pods, attachments and taint may be touched."""
        step, name = node_plan.fence, node.name
        if step is None:
            return True
        if step == PENDING:
            self.outcome.fencing_pending.append(name)
            log.info("fencing pending; nothing on the node is touched until it is confirmed",
                     extra={"node": name, "reason": node_plan.fence_reason})
            return False
        if step == REQUEST:
            return self._webhook(node_plan, node) if self.settings.fencing == "webhook" else self._request(node)
        if step == REFENCE:
            return self._refence(node)
        self._refuse(node, node_plan.fence_reason)
        return False

    def _refuse(self, node: Node, why: str) -> None:
        self.writer.fail(f"fencing of node {node.name} not confirmed: {why}; nothing on it was touched")
        self.events.node(node.name, node.uid, "Warning", "FencingFailed",
                         f"{why}; rwo-failover touched nothing on this node")

    def _webhook(self, node_plan: NodePlan, node: Node) -> bool:
        payload = {"node": node.name, "uid": node.uid, "providerID": node.provider_id,
                   "addresses": list(node.internal_ips), "taint": node_plan.verdict.taint,
                   "reason": node_plan.verdict.reason}
        result, why = self.writer.call_fence_webhook(node.name, lambda: fence_webhook.fence(
            payload, self.settings, self.api.remaining, self.sleep))
        if result in (Result.DONE, Result.WOULD):
            self.outcome.fenced.append(node.name)
            log.info("fence webhook confirmed the node fenced", extra={"node": node.name})
            return True
        if result is Result.FAILED:
            self.events.node(node.name, node.uid, "Warning", "FencingFailed",
                             f"fence webhook did not confirm: {why}; rwo-failover touched nothing on this node")
        return False

    def _request(self, node: Node) -> bool:
        """Create our NetworkFence (or set ours back to Fenced); the answer comes in a later pass."""
        body = {"apiVersion": NETWORK_FENCE_API, "kind": "NetworkFence",
                "metadata": {"name": node.name, "labels": {FENCE_LABEL: "rwo-failover"}},
                "spec": {"fenceState": "Fenced", "networkFenceClassName": self.settings.network_fence_class,
                         "cidrs": cidrs(node)}}
        result = self.writer.create_networkfence(node.name, body)
        # CONFLICT: someone created one since we looked; the next pass judges whose it is, and never trusts
        # (nor touches) one that is not ours.
        return self._asked(node, result, f"created NetworkFence {node.name}")

    def _refence(self, node: Node) -> bool:
        """Our NetworkFence was set Unfenced by an earlier recovery and the node is down again."""
        result = self.writer.patch_networkfence(node.name, {"spec": {"fenceState": "Fenced", "cidrs": cidrs(node)}},
                                                "fence again")
        return self._asked(node, result, f"set NetworkFence {node.name} Fenced again")

    def _asked(self, node: Node, result: Result, what: str) -> bool:
        if result is Result.WOULD:
            return True
        self.outcome.fencing_pending.append(node.name)
        if result is Result.DONE:
            log.info("asked for fencing; nothing on the node is touched until the NetworkFence answers Succeeded",
                     extra={"node": node.name, "cidrs": cidrs(node)})
            self.events.node(node.name, node.uid, "Normal", "FencingRequested",
                             f"{what} for {', '.join(cidrs(node)) or 'no address'}")
        return False

    def unfence(self, name: str, uid: str, step: str) -> bool:
        """True when the NetworkFence is gone (unfenced and deleted), so our taint may come off."""
        if step == UNFENCE:
            if self.writer.patch_networkfence(name, {"spec": {"fenceState": "Unfenced"}}, "unfence") is Result.DONE:
                log.info("node is back: asked to unfence", extra={"node": name})
            return False
        if step == DELETE and self.writer.delete_networkfence(name) in (Result.DONE, Result.GONE):
            self.outcome.unfenced.append(name)
            self.events.node(name, uid, "Normal", "NodeUnfenced", f"NetworkFence {name} answered Unfenced; deleted it")
            return True
        return False
