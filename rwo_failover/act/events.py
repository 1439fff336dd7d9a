"""Kubernetes Events that explain each action: built here, written through the one writer."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import socket
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ..kube import ApiError
from ..model import BadObject, Json, int_at, obj_at, text_at, time_at
from ..model.event_reasons import Reason
from .writer import Result, Writer

log = logging.getLogger(__name__)
COMPONENT = "rwo-failover"
NODE_EVENT_NAMESPACE = "default"  # where kubelet and the node controller put Node events


def event_name(name: str, suffix: str) -> str:
    """An Event's name after the object it is about: the API server checks it is a DNS subdomain of at most 253
    characters. The object's name is cut to 200, and a cut ending in "-" or "." would not be one (a 253-character
    pod name may have either there): those go."""
    return f"{name[:200].rstrip('-.')}.{suffix}"


def repeated_name(node: str, reason: str, uid: str = "") -> str:
    """The deterministic name of our repeated Warning about `node` (the second one with the node's uid)."""
    base = event_name(node, f"rwo-{reason.lower()}")
    return f"{base}.{uid[:8]}" if uid else base


def build_event(namespace: str, kind: str, name: str, *, uid: str | None, event_type: str, reason: str,
                message: str, stamp: str, instance: str, cluster_scoped: bool = False) -> dict[str, Any]:
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
    return dict(event, metadata={"name": event_name(name, digest), "namespace": namespace})


REPEAT_EVERY_SECONDS = 600  # a repeated Warning is bumped at most this often per node and reason


class NotOurs(BadObject):
    """An Event at the name of one of our repeated Warnings that is not that Warning: never bumped."""


def _ours(found: object, node: str, reason: str) -> Json:
    """The Event, when it is our repeated Warning about `node`; NotOurs saying why otherwise.

    Ours is what `kubectl describe node` would show as ours: a Warning of `reason` about Node `node`, reported by
    rwo-failover. A tenant who may create Events in `default` can squat the name with anything; bumping that
    would keep its type, reason and object, and show our Warning nowhere. One that forges all of these shows
    on the node just what our bump makes it show."""
    try:
        if not isinstance(found, dict):
            raise BadObject("not a JSON object")
        involved = obj_at(found, "involvedObject")
        seen = (text_at(involved, "kind"), text_at(involved, "name"), text_at(found, "type"),
                text_at(found, "reason"), text_at(obj_at(found, "source"), "component"))
    except BadObject as err:
        raise NotOurs(str(err)[:200]) from None
    if seen != ("Node", node, "Warning", reason, COMPONENT):
        raise NotOurs("a {2} {3} Event about {0} {1}, reported by {4}".format(*(repr(v)[:80] for v in seen)))
    return found


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _gist(message: object) -> str:
    """What a message says, its figures aside: "Lease renewed 3s ago" says what "... 9s ago" does."""
    return _NUMBER.sub("#", message[:1024]) if isinstance(message, str) else ""


def bump_of(found: object, now: datetime, stamp: str, *, message: str, node: str, uid: str,
            reason: str) -> dict[str, Any] | None:
    """The merge patch that bumps our existing repeated Warning; None while it was bumped within
    REPEAT_EVERY_SECONDS, names the node as it is now and says what `message` says. NotOurs when it is not ours
    (_ours).

    The patch points the Event at the node as it is now: describe finds Events by uid, so one written before
    Events carried it, or about a Node since re-registered under the same name, would otherwise never show.
    A message that says something else is replaced at once: the node's kubelet may create Events about itself,
    and could write ours first, fresh, with words of its own. Whatever else it holds, a count or a time that
    cannot be read, the bump repairs."""
    event = _ours(found, node, reason)
    involved = {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid or None, "namespace": None}
    current = {k: v for k, v in involved.items() if v is not None}
    try:
        last, count = time_at(event, "lastTimestamp"), int_at(event, "count", 1, high=2**31 - 2)
        version: str | None = text_at(obj_at(event, "metadata"), "resourceVersion") or None
        pointed = {k: v for k, v in obj_at(event, "involvedObject").items() if k in involved} == current
    except BadObject:
        last, count, version, pointed = None, 1, None, False
    said = _gist(event.get("message")) == _gist(message)
    if pointed and said and last is not None and 0 <= (now - last).total_seconds() < REPEAT_EVERY_SECONDS:
        return None
    return {"count": max(count, 1) + 1, "lastTimestamp": stamp, "message": message[:1024],
            "involvedObject": involved, "metadata": {"resourceVersion": version}}


class EventRecorder:
    def __init__(self, writer: Writer, now: Callable[[], datetime]) -> None:
        self.writer, self.now = writer, now
        self.instance = socket.gethostname()

    def stamp(self) -> str:
        return self.now().strftime("%Y-%m-%dT%H:%M:%SZ")

    def repeated(self, node: str, uid: str, reason: Reason, *, message: str) -> None:
        """A Warning that would otherwise come every pass (split-brain, a refusal): one Event per node and
        reason, whose count and lastTimestamp are bumped at most every REPEAT_EVERY_SECONDS, as the kubelet's
        event recorder aggregates repeats. Its name is deterministic; when an Event that is not ours holds it,
        a second name (with the node's uid, which a tenant who cannot read nodes cannot guess), then a
        generated one."""
        event = build_event(NODE_EVENT_NAMESPACE, "Node", node, uid=uid, event_type="Warning", reason=reason,
                            message=message, stamp=self.stamp(), instance=self.instance, cluster_scoped=True)
        base = repeated_name(node, reason)
        for name in (base, repeated_name(node, reason, uid)) if uid else (base,):
            try:
                self._create_or_bump(event, name, node, uid=uid, reason=reason, message=message)
                return
            except NotOurs as err:
                log.warning("the name of a repeated Warning is taken by an Event that is not ours; writing it "
                            "under another name", extra={"event": f"{NODE_EVENT_NAMESPACE}/{name}", "node": node,
                                                         "reason": reason, "found": str(err)})
        event["metadata"] = {"generateName": f"{base}-", "namespace": NODE_EVENT_NAMESPACE}
        self.writer.create_event(NODE_EVENT_NAMESPACE, event)

    def _create_or_bump(self, event: dict[str, Any], name: str, node: str, *, uid: str, reason: str,
                        message: str) -> None:
        """Create the Warning under `name`, or bump ours there; NotOurs when another Event holds the name."""
        event["metadata"] = {"name": name, "namespace": NODE_EVENT_NAMESPACE}
        if self.writer.create_event(NODE_EVENT_NAMESPACE, event, repeat=True) is not Result.CONFLICT:
            return
        try:  # a read like any other of the pass: retried by the client, and a failure is judged, never raised
            found = self.writer.api.read_event(NODE_EVENT_NAMESPACE, name)
        except ApiError as err:
            self.writer.fail(f"reading Event {NODE_EVENT_NAMESPACE}/{name} to bump it failed: {err}", err)
            return
        bump = bump_of(found, self.now(), self.stamp(), message=message, node=node, uid=uid,
                       reason=reason) if found is not None else None
        if bump is not None:
            self.writer.patch_event(NODE_EVENT_NAMESPACE, name, bump)

    # Every Event names its object's uid: `kubectl describe` finds Events by involvedObject kind, name,
    # namespace and uid, so one without the uid would never be shown where operators look first.
    def node(self, node: str, uid: str, event_type: str, *, reason: Reason, message: str) -> None:
        self.writer.create_event(NODE_EVENT_NAMESPACE, build_event(
            NODE_EVENT_NAMESPACE, "Node", node, uid=uid, event_type=event_type, reason=reason, message=message,
            stamp=self.stamp(), instance=self.instance, cluster_scoped=True))

    def pod(self, namespace: str, name: str, uid: str, *, reason: Reason, message: str) -> None:
        self.writer.create_event(namespace, build_event(
            namespace, "Pod", name, uid=uid, event_type="Normal", reason=reason, message=message, stamp=self.stamp(),
            instance=self.instance))

    def claim(self, claim_key: str, uid: str, reason: Reason, *, message: str,
              event_type: str = "Normal") -> None:
        namespace, _, name = claim_key.partition("/")
        self.writer.create_event(namespace, build_event(
            namespace, "PersistentVolumeClaim", name, uid=uid, event_type=event_type, reason=reason, message=message,
            stamp=self.stamp(), instance=self.instance))
