"""The same calls on any API server, and what it did with them: what a create keeps of a status, what a graceful
delete, a second delete, a finalizer and its removal do to a pod and a VolumeAttachment. tests/e2e/
test_e2e_fixture_parity.py runs them on kube-apiserver and on the fixture and wants the same; tests/
test_fake_apiserver.py wants EXPECTED of the fixture alone (what kube-apiserver v1.36.2 answered, issue 37)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from rwo_testkit.fake_lifecycle import attacher_finalizer
from rwo_testkit.kube import Kube

NODE, NS = "parity-node", "default"
PODS, VAS = f"/api/v1/namespaces/{NS}/pods", "/apis/storage.k8s.io/v1/volumeattachments"
HOLD = "example.com/hold"
DRIVER = "ebs.csi.aws.com"


def _pod(name: str, finalizers: tuple[str, ...] = ()) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, **({"finalizers": list(finalizers)} if finalizers else {})},
            "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 30,
                     "containers": [{"name": "c", "image": "registry.example.com/app:v1",
                                     "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
            "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z",
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _state(obj: dict | None) -> Any:
    """Gone, or (seconds from now to deletionTimestamp in tens, deletionGracePeriodSeconds, finalizers)."""
    if obj is None:
        return "gone"
    meta = obj["metadata"]
    stamp = meta.get("deletionTimestamp")
    if stamp is None:
        return "live"
    at = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    return (int(round((at - time.time()) / 10.0)) * 10, meta.get("deletionGracePeriodSeconds"),
            tuple(meta.get("finalizers") or ()))


def _drop_finalizers(kube: Kube, path: str) -> None:
    current = kube.get(path)
    kube.patch(path, {"metadata": {"finalizers": [], "resourceVersion": current["metadata"]["resourceVersion"]}})


def lifecycle_facts(kube: Kube, suffix: str = "") -> dict[str, Any]:
    if kube.get(f"/api/v1/nodes/{NODE}") is None:
        kube.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
    facts: dict[str, Any] = {}
    p1, p2, p3 = (f"{PODS}/p{i}{suffix}" for i in (1, 2, 3))
    created = kube.create(PODS, _pod(f"p1{suffix}"))
    facts["pod status after create"] = created["status"]
    generation = created["metadata"].get("generation")
    answer = kube.delete(p1, {"apiVersion": "v1", "kind": "DeleteOptions"})
    facts["graceful delete: the answer"] = _state(answer)
    facts["graceful delete: generation + 1"] = answer["metadata"].get("generation") == (generation or 0) + 1
    facts["graceful delete"] = _state(kube.get(p1))
    kube.delete(p1, {"gracePeriodSeconds": 10})
    facts["shorter grace"] = _state(kube.get(p1))
    kube.delete(p1, {"gracePeriodSeconds": 20})
    facts["longer grace"] = _state(kube.get(p1))
    facts["grace 0: the answer"] = _state(kube.delete(p1, {"gracePeriodSeconds": 0}))
    facts["grace 0"] = _state(kube.get(p1))
    kube.create(PODS, _pod(f"p2{suffix}", (HOLD,)))
    kube.delete(p2, {"gracePeriodSeconds": 0})
    facts["finalizer, grace 0"] = _state(kube.get(p2))
    _drop_finalizers(kube, p2)
    facts["finalizer, grace 0, finalizer removed"] = _state(kube.get(p2))
    kube.create(PODS, _pod(f"p3{suffix}", (HOLD,)))
    kube.delete(p3, {"gracePeriodSeconds": 30})
    _drop_finalizers(kube, p3)
    facts["finalizer, grace 30, finalizer removed"] = _state(kube.get(p3))
    kube.delete(p3, {"gracePeriodSeconds": 0})  # its kubelet's final delete

    va = f"{VAS}/va{suffix}"
    created = kube.create(VAS, {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                                "metadata": {"name": f"va{suffix}", "finalizers": [attacher_finalizer(DRIVER)]},
                                "spec": {"attacher": DRIVER, "nodeName": NODE,
                                         "source": {"persistentVolumeName": f"pv{suffix}"}},
                                "status": {"attached": True}})
    facts["attachment status after create"] = created["status"]
    facts["attachment delete: the answer"] = _state(kube.delete(va, {"apiVersion": "v1", "kind": "DeleteOptions"}))
    first = kube.get(va)
    facts["attachment delete"] = _state(first)
    kube.delete(va, {})
    facts["attachment deleted again: same deletionTimestamp"] = \
        kube.get(va)["metadata"]["deletionTimestamp"] == first["metadata"]["deletionTimestamp"]
    _drop_finalizers(kube, va)
    facts["attachment, finalizer removed"] = _state(kube.get(va))
    claim = kube.create(f"/api/v1/namespaces/{NS}/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": f"c{suffix}"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound"}})
    facts["claim phase after create"] = claim["status"]["phase"]
    return facts


HELD = (HOLD,)
EXPECTED = {
    "pod status after create": {"phase": "Pending", "qosClass": "Burstable"},
    "graceful delete: the answer": (30, 30, ()),
    "graceful delete: generation + 1": True,
    "graceful delete": (30, 30, ()),
    "shorter grace": (10, 10, ()),
    "longer grace": (10, 10, ()),
    "grace 0: the answer": (0, 0, ()),
    "grace 0": "gone",
    "finalizer, grace 0": (0, 0, HELD),
    "finalizer, grace 0, finalizer removed": "gone",
    "finalizer, grace 30, finalizer removed": (30, 30, ()),
    "attachment status after create": {"attached": False},
    "attachment delete: the answer": (0, 0, (attacher_finalizer(DRIVER),)),
    "attachment delete": (0, 0, (attacher_finalizer(DRIVER),)),
    "attachment deleted again: same deletionTimestamp": True,
    "attachment, finalizer removed": "gone",
    "claim phase after create": "Pending",
}
