"""Kubernetes Events that explain each action: built here, written through the one writer."""

from __future__ import annotations

import hashlib
import json
import socket
from datetime import datetime
from typing import Callable, Optional

from .client import ApiError
from .model import BadObject, int_at, obj_at, text_at, time_at
from .writer import Result, Writer

COMPONENT = "rwo-failover"
NODE_EVENT_NAMESPACE = "default"  # where kubelet and the node controller put Node events


def build_event(namespace: str, kind: str, name: str, uid: Optional[str], event_type: str, reason: str,
                message: str, stamp: str, instance: str, cluster_scoped: bool = False) -> dict:
    involved = {"apiVersion": "v1", "kind": kind, "name": name, "uid": uid,
                "namespace": None if cluster_scoped else namespace}
    event = {"involvedObject": {k: v for k, v in involved.items() if v},
             "type": event_type, "reason": reason, "message": message[:1024], "count": 1,
             "firstTimestamp": stamp, "lastTimestamp": stamp,
             "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
             "reportingInstance": instance}
    # A name derived from the content, not generateName: a create retried after a lost answer gets 409
    # instead of recording the same Event twice.
    digest = hashlib.sha256(json.dumps(event, sort_keys=True).encode()).hexdigest()[:16]
    return dict(event, metadata={"name": f"{name[:200]}.{digest}", "namespace": namespace})


REPEAT_EVERY_SECONDS = 600  # a repeated Warning is bumped at most this often per node and reason


def bump_of(found: object, now: datetime, stamp: str, message: str) -> Optional[dict]:
    """The merge patch that bumps an existing repeated Event; None while it was bumped within
    REPEAT_EVERY_SECONDS. Whatever the Event holds: one that cannot be read is repaired by the bump."""
    try:
        if not isinstance(found, dict):
            raise BadObject("not an object")
        last, count = time_at(found, "lastTimestamp"), int_at(found, "count", 1, high=2**31 - 2)
        version: Optional[str] = text_at(obj_at(found, "metadata"), "resourceVersion") or None
    except BadObject:
        last, count, version = None, 1, None
    if last is not None and 0 <= (now - last).total_seconds() < REPEAT_EVERY_SECONDS:
        return None
    return {"count": max(count, 1) + 1, "lastTimestamp": stamp, "message": message[:1024],
            "metadata": {"resourceVersion": version}}


class EventRecorder:
    def __init__(self, writer: Writer, now: Callable[[], datetime]) -> None:
        self.writer, self.now = writer, now
        self.instance = socket.gethostname()

    def stamp(self) -> str:
        return self.now().strftime("%Y-%m-%dT%H:%M:%SZ")

    def repeated(self, node: str, uid: str, reason: str, message: str) -> None:
        """A Warning that would otherwise come every pass (split-brain, a refusal): one Event per node and
        reason, whose count and lastTimestamp are bumped at most every REPEAT_EVERY_SECONDS, as the kubelet's
        event recorder aggregates repeats."""
        event = build_event(NODE_EVENT_NAMESPACE, "Node", node, uid, "Warning", reason, message, self.stamp(),
                            self.instance, cluster_scoped=True)
        name = f"{node[:200]}.rwo-{reason.lower()}"
        event["metadata"]["name"] = name
        if self.writer.create_event(NODE_EVENT_NAMESPACE, event, repeat=True) is not Result.CONFLICT:
            return
        try:  # a read like any other of the pass: retried by the client, and a failure is judged, never raised
            found = self.writer.api.read_event(NODE_EVENT_NAMESPACE, name)
        except ApiError as err:
            self.writer.fail(f"reading Event {NODE_EVENT_NAMESPACE}/{name} to bump it failed: {err}", err)
            return
        bump = bump_of(found, self.now(), self.stamp(), message) if found is not None else None
        if bump is not None:
            self.writer.patch_event(NODE_EVENT_NAMESPACE, name, bump)

    # Every Event names its object's uid: `kubectl describe` finds Events by involvedObject kind, name,
    # namespace and uid, so one without the uid would never be shown where operators look first.
    def node(self, node: str, uid: str, event_type: str, reason: str, message: str) -> None:
        self.writer.create_event(NODE_EVENT_NAMESPACE, build_event(
            NODE_EVENT_NAMESPACE, "Node", node, uid, event_type, reason, message, self.stamp(), self.instance,
            cluster_scoped=True))

    def pod(self, namespace: str, name: str, uid: str, reason: str, message: str) -> None:
        self.writer.create_event(namespace, build_event(
            namespace, "Pod", name, uid, "Normal", reason, message, self.stamp(), self.instance))

    def claim(self, claim_key: str, uid: str, reason: str, message: str, event_type: str = "Normal") -> None:
        namespace, _, name = claim_key.partition("/")
        self.writer.create_event(namespace, build_event(
            namespace, "PersistentVolumeClaim", name, uid, event_type, reason, message, self.stamp(), self.instance))
