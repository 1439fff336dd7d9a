"""What kube-apiserver does to an object's lifecycle, for the fixture API server (fake_apiserver.py): what a create
resets, graceful deletion, finalizers, and the CSI external-attacher that holds a VolumeAttachment until it has
detached the volume. No kinder than the real server (issue 37): a test that passed only because the fixture
removed a VolumeAttachment at once, kept a created pod's status, or stamped a graceful deletion "now" proved
nothing.

Each rule follows the apiserver's source (k8s.io/apiserver registry/rest/delete.go BeforeDelete, registry/generic/
registry/store.go Delete, markAsDeleting and ShouldDeleteDuringUpdate; pkg/registry/core/pod/strategy.go
PrepareForCreate and CheckGracefulDelete; the storage strategies' PrepareForCreate) and was checked against
kube-apiserver v1.36.2 (tests/e2e/test_e2e_fixture_parity.py runs the same calls on both):

- a pod created with a status gets {"phase": "Pending", "qosClass": ...}; a VolumeAttachment {"attached": false};
  a PVC {"phase": "Pending"}; a PV {"phase": "Pending", "lastPhaseTransitionTime": now}. A Node keeps its status.
- a pod deleted with a grace period (its own terminationGracePeriodSeconds by default) is marked: deletionTimestamp
  is now plus the grace, deletionGracePeriodSeconds the grace, generation + 1; it stays until its kubelet's final
  delete (grace 0). Unscheduled or finished pods have no grace. Deleting it again may only shorten the grace
  (deletionTimestamp moves back by the difference, never before now); grace 0 removes it, unless finalizers hold it.
- any other kind is removed at once, unless finalizers hold it: then deletionTimestamp is now (kept if earlier),
  deletionGracePeriodSeconds 0. The answer is the object either way.
- an update that removes the last finalizer of an object being deleted with grace 0 removes it.
- the CSI external-attacher (kubernetes-csi/external-attacher) puts `external-attacher/<driver>` on every
  VolumeAttachment it handles (the driver's name with each character outside [a-zA-Z0-9-] made '-'), and removes it
  once ControllerUnpublishVolume succeeded: only then does a deleted attachment go. `Attacher.detach` plays it,
  when the test says so, as node_sim.py's does on the real server.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

GRACEFUL_KINDS = frozenset({"pods"})  # the kinds here whose registry implements graceful deletion
DEFAULT_GRACE_SECONDS = 30  # the API's default for a pod's spec.terminationGracePeriodSeconds
TERMINAL_PHASES = ("Succeeded", "Failed")
# The kinds whose metadata.generation the server keeps (pods since PodObservedGenerationTracking; every custom
# resource). kube-apiserver v1.36.2 returned none for a VolumeAttachment, claim, volume or node.
GENERATION_KINDS = frozenset({"pods", "networkfences"})


def attacher_finalizer(driver: str) -> str:
    """external-attacher's GetFinalizerName: "external-attacher/" + SanitizeDriverName(driver)."""
    name = re.sub(r"[^a-zA-Z0-9-]", "-", driver)
    return "external-attacher/" + (name + "X" if name.endswith("-") else name)


def _time(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def _text(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def reset_on_create(plural: str, obj: dict, now: float) -> None:
    """What the registry's PrepareForCreate does to the status a client sent."""
    if plural == "pods":
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj.get("spec") or {})}
    elif plural == "volumeattachments":
        obj["status"] = {"attached": False}
    elif plural == "persistentvolumeclaims":
        obj["status"] = {"phase": "Pending"}
    elif plural == "persistentvolumes":
        obj["status"] = {"phase": "Pending", "lastPhaseTransitionTime": _text(now)}
    if plural in GENERATION_KINDS:
        obj["metadata"]["generation"] = 1


def qos_class(spec: dict) -> str:
    """The pod's QoS class (k8s.io/kubernetes pkg/apis/core/helper/qos), for cpu and memory."""
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    requests_seen = limits_seen = False
    guaranteed = True
    for container in containers:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        requests_seen = requests_seen or any(k in requests for k in ("cpu", "memory"))
        limits_seen = limits_seen or any(k in limits for k in ("cpu", "memory"))
        for key in ("cpu", "memory"):
            if key not in limits or requests.get(key, limits[key]) != limits[key]:
                guaranteed = False
    if not requests_seen and not limits_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed and limits_seen else "Burstable"


def _requested_grace(options: dict, query: dict[str, str]) -> int | None:
    for source in (options.get("gracePeriodSeconds"), query.get("gracePeriodSeconds")):
        if source is not None and source != "":
            grace = int(source)
            return 1 if grace < 0 else grace  # negative values mean 1 s on the delete path
    return None


def delete(plural: str, obj: dict, options: dict, *, query: dict[str, str], now: float) -> tuple[bool, bool]:
    """A DELETE applied to `obj`, whose metadata it changes in place: (stays, changed). `stays` when finalizers, or a
    graceful deletion a kubelet must finish, keep it; else it is removed now. `changed` when it must be stored."""
    meta = obj["metadata"]
    held = bool(meta.get("finalizers"))
    requested = _requested_grace(options, query)
    if plural in GRACEFUL_KINDS:
        if not meta.get("deletionTimestamp"):
            period = _begin_graceful_deletion(obj, requested, now)
            return held or period > 0, True
        if meta.get("deletionGracePeriodSeconds") not in (None, 0):
            shortened = _shorten_graceful_deletion(meta, requested, now)
            if shortened is None:
                return True, False  # a graceful deletion is pending: only a shorter grace changes it
            return held or shortened > 0, True
    if not held:
        return False, False
    _mark_as_deleting(meta, now)
    return True, True


def _begin_graceful_deletion(obj: dict, requested: int | None, now: float) -> int:
    """The first DELETE of a pod: deletionTimestamp is now plus its grace (none when it is unscheduled or finished),
    generation + 1. The grace."""
    meta, spec, phase = obj["metadata"], obj.get("spec") or {}, (obj.get("status") or {}).get("phase")
    period = requested if requested is not None else int(spec.get("terminationGracePeriodSeconds",
                                                                       DEFAULT_GRACE_SECONDS))
    if not spec.get("nodeName") or phase in TERMINAL_PHASES:
        period = 0
    meta["deletionTimestamp"], meta["deletionGracePeriodSeconds"] = _text(now + period), period
    if int(meta.get("generation") or 0) > 0:
        meta["generation"] = int(meta["generation"]) + 1
    return period


def _shorten_graceful_deletion(meta: dict, requested: int | None, now: float) -> int | None:
    """Another DELETE of a pod being deleted gracefully: a shorter grace moves deletionTimestamp back by the
    difference, never before now. The new grace; None when the request does not shorten it (nothing changes)."""
    current = meta.get("deletionGracePeriodSeconds")
    if requested is None or requested >= current:
        return None
    moved = _time(meta["deletionTimestamp"]) - current + requested
    period = requested
    if moved < now:
        moved, period = now, (1 if requested else 0)
    meta["deletionTimestamp"], meta["deletionGracePeriodSeconds"] = _text(moved), period
    return period


def _mark_as_deleting(meta: dict, now: float) -> None:
    """markAsDeleting, for an object its finalizers keep: deletionTimestamp now, unless an earlier one is set; no
    grace."""
    if not meta.get("deletionTimestamp") or _time(meta["deletionTimestamp"]) > now:
        meta["deletionTimestamp"] = _text(now)
    meta["deletionGracePeriodSeconds"] = 0


def delete_during_update(old: dict, new: dict) -> bool:
    """ShouldDeleteDuringUpdate: the update removed the last finalizer of an object being deleted with grace 0."""
    meta, was = new.get("metadata") or {}, old.get("metadata") or {}
    return not meta.get("finalizers") and bool(was.get("deletionTimestamp")) and \
        was.get("deletionGracePeriodSeconds") in (None, 0)


@dataclass
class Attacher:
    """The CSI external-attacher of the fixture's VolumeAttachments: `detach()` is ControllerUnpublishVolume
    succeeding for every attachment being deleted (or those named), and the finalizer coming off. It records, as
    node_sim.py's does, whether the attachment's node carried the out-of-service taint at that moment (ceph-csi
    3.15+ fences the node's clients only then): (attachment, node, tainted)."""

    update: Callable[[str, Callable[[dict], Any]], dict | None]  # (name, change) -> the object, None if removed
    objects: Callable[[], list[dict]]
    node: Callable[[str], dict | None]
    unpublished: list[tuple[str, str, bool]] = field(default_factory=list)

    def detach(self, *names: str) -> list[str]:
        done = []
        for va in self.objects():
            meta, spec = va.get("metadata"), va.get("spec")
            if not isinstance(meta, dict) or not isinstance(spec, dict):
                continue  # a hostile object of the fuzz tier: no attacher handles it
            mine, finalizers = attacher_finalizer(str(spec.get("attacher", ""))), meta.get("finalizers")
            if not meta.get("deletionTimestamp") or not isinstance(finalizers, list) or mine not in finalizers:
                continue
            if names and meta["name"] not in names:
                continue
            node = self.node(str(spec.get("nodeName", ""))) or {}
            taints = (node.get("spec") if isinstance(node.get("spec"), dict) else {}).get("taints")
            tainted = isinstance(taints, list) and any(
                isinstance(t, dict) and t.get("key") == "node.kubernetes.io/out-of-service" for t in taints)
            self.unpublished.append((meta["name"], str(spec.get("nodeName", "")), tainted))
            self.update(meta["name"], lambda m, mine=mine: m.__setitem__(
                "finalizers", [f for f in m.get("finalizers") or () if f != mine]))
            done.append(meta["name"])
        return done
