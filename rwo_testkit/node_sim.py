"""The node side of the e2e tier: simulated kubelets and one CSI external-attacher, in a background thread.

Only what the tier needs, each behaviour modelled on the real component:

- **Node registration** (kubelet `registerWithAPIServer`): a Node with capacity and allocatable, an
  InternalIP, and the annotation `volumes.kubernetes.io/controller-managed-attach-detach: "true"`, which
  hands attach and detach to the attach-detach controller (the default since Kubernetes 1.4).
- **Lease renewals** (kubelet `nodelease` controller): the Lease `kube-node-lease/<node>`, holder the node,
  `leaseDurationSeconds` as the kubelet's `--node-lease-duration-seconds`, renewed every quarter of it.
- **Status posts** (kubelet `syncNodeStatus`): the Ready condition with a fresh `lastHeartbeatTime`, every
  10 s (`nodeStatusUpdateFrequency`) and at once when `volumesInUse` changes. `volumesAttached` is *not*
  ours: the attach-detach controller's node-status updater writes it; the kubelet only reads it.
- **Pods on a live node** (kubelet volume manager and status manager): a pod starts once every CSI volume
  it mounts is in `node.status.volumesAttached` (`verifyControllerAttachedVolume`); the volume then goes into
  `volumesInUse`, and the pod becomes Running with Ready=True. A running pod someone marked not Ready (the
  node controller does, while the node is NotReady) gets its Ready status back, as the status manager
  reconciles it. A pod with a deletionTimestamp is stopped and
  then deleted with grace 0 and a UID precondition (the status manager's final delete), and its volumes
  leave `volumesInUse`.
- **CSI external-attacher** (kubernetes-csi/external-attacher): for each VolumeAttachment whose attacher is
  our driver, it adds the finalizer `external-attacher/<driver>` and sets `status.attached=true`; when the
  attachment is being deleted, it detaches and removes the finalizer. The attacher runs on the control-plane
  side, so a node's power-off does not stop it. Our `CSIDriver` has `attachRequired: true`. Its
  ControllerUnpublishVolume records, as ceph-csi 3.15+ decides whether to blocklist the node's clients, whether
  the node carries the out-of-service taint at that moment (`unpublished`).
- **Power-off**: no more Lease renewals, status posts or pod handling on that node. Its pods are never
  finalized, exactly as on a dead machine. **Power-on** boots it again: a new `status.nodeInfo.bootID`, as
  the kubelet reads a new one from the kernel at every boot; **reconnect** brings back a machine that was only
  cut off, with the same bootID.
- **A node's own clock** (`clock_offset`): everything the kubelet stamps (renewTime, its condition times) is
  that many seconds off the server's, as on a machine whose clock drifted; the server stamps its own time
  on every write regardless.
- **Container runtime down** (`runtime_down`): the kubelet keeps renewing its Lease and posts Ready=False
  (KubeletNotReady), as a real kubelet does when its runtime stops answering.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import urllib3

from .fake_cluster import machine_uuid
from .kube import STRATEGIC, Kube, KubeError

DRIVER = "sim.csi.rwo-failover.test"
FINALIZER = "external-attacher/sim-csi-rwo-failover-test"
STORAGE_CLASS = "sim-rwo"
STATUS_EVERY_SECONDS = 10.0
OUT_OF_SERVICE_KEY = "node.kubernetes.io/out-of-service"


def now_text(micro: bool = False, offset: float = 0.0) -> str:
    moment = datetime.now(UTC) + timedelta(seconds=offset)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


class SimNode:
    def __init__(self, name: str, address: str, lease_seconds: int, *, clock_offset: float = 0.0) -> None:
        self.name, self.address = name, address
        self.lease_seconds, self.clock_offset = lease_seconds, clock_offset
        self.powered = True
        self.runtime_up = True
        # The Ready condition's lastTransitionTime, by the kubelet's clock: only a change moves it.
        self.ready_since = now_text(offset=clock_offset)
        self.last_lease = 0.0
        self.last_status = 0.0
        self.in_use: list[str] = []
        self.boots = 1  # status.nodeInfo.bootID is new at every boot, as the kubelet's (read from the kernel)

    @property
    def boot_id(self) -> str:
        return f"{self.name}-boot-{self.boots}"


class Background:
    """A loop in a daemon thread for the life of a `with` block: `tick()` every `period` seconds."""

    period = 0.5

    def __enter__(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=type(self).__name__, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            self.tick()

    def tick(self) -> None:
        raise NotImplementedError


class NodeSimulator(Background):
    """`with NodeSimulator(kubeconfig) as sim: sim.add_node("n1"); sim.power_off("n1")`."""

    def __init__(self, kubeconfig: Path, lease_seconds: int = 10, tick: float = 0.5) -> None:
        self.kube = Kube(kubeconfig)
        self.lease_seconds, self.period = lease_seconds, tick
        self.nodes: dict[str, SimNode] = {}
        self._added = 0
        self.lock = threading.Lock()
        self.errors: list[str] = []
        self.unpublished: list[tuple[str, str, bool]] = []  # (VolumeAttachment, node, the node was tainted then)

    def __enter__(self) -> NodeSimulator:
        self.install_storage()
        return super().__enter__()

    # --- setup ----------------------------------------------------------------------------------------
    def install_storage(self) -> None:
        self.kube.apply("/apis/storage.k8s.io/v1/csidrivers", {
            "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": DRIVER},
            "spec": {"attachRequired": True, "podInfoOnMount": False, "volumeLifecycleModes": ["Persistent"]}})
        self.kube.apply("/apis/storage.k8s.io/v1/storageclasses", {
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": STORAGE_CLASS},
            "provisioner": DRIVER, "volumeBindingMode": "Immediate", "reclaimPolicy": "Retain"})

    def add_volume(self, name: str, namespace: str, claim: str, *,
                   modes: tuple[str, ...] = ("ReadWriteOnce",)) -> dict:
        """A CSI PV of our driver, pre-bound to the claim a StatefulSet (or a test) will create."""
        return self.kube.apply("/api/v1/persistentvolumes", {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": list(modes), "storageClassName": STORAGE_CLASS,
                     "persistentVolumeReclaimPolicy": "Retain",
                     "claimRef": {"namespace": namespace, "name": claim},
                     "csi": {"driver": DRIVER, "volumeHandle": f"handle-{name}"}}})

    def add_node(self, name: str, labels: dict | None = None, lease_seconds: int | None = None, *,
                 clock_offset: float = 0.0) -> None:
        self._added += 1  # never reused, so no two nodes ever share an address
        address = f"10.99.{self._added // 250}.{self._added % 250 + 2}"
        self.kube.create("/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                  **(labels or {})},
                         "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
            "spec": {}})
        node = SimNode(name, address, lease_seconds or self.lease_seconds, clock_offset=clock_offset)
        self._renew_lease(node)
        self._post_status(node)
        with self.lock:
            self.nodes[name] = node

    def power_off(self, name: str) -> None:
        with self.lock:
            self.nodes[name].powered = False

    def power_on(self, name: str) -> None:
        """The machine boots again: a new bootID, and its kubelet reports at once."""
        with self.lock:
            node = self.nodes[name]
            node.powered, node.last_lease, node.last_status = True, 0.0, 0.0
            node.ready_since = now_text(offset=node.clock_offset)
            node.boots += 1

    def reconnect(self, name: str) -> None:
        """The machine was never down, only cut off: its network is back, with the same bootID."""
        with self.lock:
            node = self.nodes[name]
            node.powered, node.last_lease, node.last_status = True, 0.0, 0.0
            node.ready_since = now_text(offset=node.clock_offset)

    def runtime_down(self, name: str) -> None:
        """The container runtime stops answering: the kubelet still renews its Lease, and posts Ready=False."""
        with self.lock:
            node = self.nodes[name]
            node.runtime_up, node.last_status = False, 0.0
            node.ready_since = now_text(offset=node.clock_offset)

    def remove_node(self, name: str) -> None:
        with self.lock:
            self.nodes.pop(name, None)
        self.kube.delete(f"/api/v1/nodes/{name}")
        self.kube.delete(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}")

    # --- the loop -------------------------------------------------------------------------------------
    def tick(self) -> None:
        with self.lock:
            live = [n for n in self.nodes.values() if n.powered]
        for step in [self._attacher] + [lambda n=n: self._kubelet(n) for n in live]:
            try:
                step()
            except (KubeError, OSError, urllib3.exceptions.HTTPError) as err:  # a bad answer, or an API server
                # restarting: a kubelet retries, and so does the simulation
                self.errors.append(str(err))

    def _kubelet(self, node: SimNode) -> None:
        now = time.monotonic()
        if now - node.last_lease >= node.lease_seconds / 4:
            self._renew_lease(node)
        attached = self._attached_volumes(node)
        in_use = sorted(node.in_use)
        for pod in self.kube.items("/api/v1/pods", fieldSelector=f"spec.nodeName={node.name}"):
            self._sync_pod(node, pod, attached, in_use=in_use)
        if in_use != sorted(node.in_use) or now - node.last_status >= STATUS_EVERY_SECONDS:
            node.in_use = in_use
            self._post_status(node)

    def _renew_lease(self, node: SimNode) -> None:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": node.name, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": node.name, "leaseDurationSeconds": node.lease_seconds,
                         "renewTime": now_text(micro=True, offset=node.clock_offset)}}
        self.kube.apply("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", body)
        node.last_lease = time.monotonic()

    def _post_status(self, node: SimNode) -> None:
        stamp = now_text(offset=node.clock_offset)
        ready = {"status": "True", "reason": "KubeletReady", "message": "simulated kubelet is posting ready status"} \
            if node.runtime_up else {"status": "False", "reason": "KubeletNotReady",
                                     "message": "container runtime is down"}
        self.kube.patch(f"/api/v1/nodes/{node.name}/status", {"status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "addresses": [{"type": "InternalIP", "address": node.address}, {"type": "Hostname", "address": node.name}],
            "conditions": [{"type": "Ready", **ready, "lastHeartbeatTime": stamp,
                            "lastTransitionTime": node.ready_since}],
            "volumesInUse": [f"kubernetes.io/csi/{v}" for v in node.in_use],
            "nodeInfo": {"kubeletVersion": "v1.36.2", "architecture": "amd64", "operatingSystem": "linux",
                         "containerRuntimeVersion": "sim://1", "kernelVersion": "6.1", "osImage": "sim",
                         "kubeProxyVersion": "", "machineID": node.name, "systemUUID": machine_uuid(node.name),
                         "bootID": node.boot_id}}}, content_type=STRATEGIC)
        node.last_status = time.monotonic()

    def _attached_volumes(self, node: SimNode) -> set[str]:
        found = self.kube.get(f"/api/v1/nodes/{node.name}") or {}
        names = {v.get("name", "") for v in (found.get("status") or {}).get("volumesAttached") or ()}
        return {n.removeprefix("kubernetes.io/csi/") for n in names}

    def _pod_volumes(self, pod: dict) -> list[str] | None:
        """The unique names (driver^handle) of the pod's CSI volumes; None while a claim is not bound yet."""
        found = []
        for volume in (pod.get("spec") or {}).get("volumes") or ():
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if not claim:
                continue
            pvc = self.kube.get(f"/api/v1/namespaces/{pod['metadata']['namespace']}/persistentvolumeclaims/{claim}")
            pv_name = ((pvc or {}).get("spec") or {}).get("volumeName")
            pv = self.kube.get(f"/api/v1/persistentvolumes/{pv_name}") if pv_name else None
            csi = ((pv or {}).get("spec") or {}).get("csi")
            if not csi:
                return None
            found.append(f"{csi['driver']}^{csi['volumeHandle']}")
        return found

    def _sync_pod(self, node: SimNode, pod: dict, attached: set[str], *, in_use: list[str]) -> None:
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        if meta.get("deletionTimestamp"):
            for volume in self._pod_volumes(pod) or ():
                if volume in in_use:
                    in_use.remove(volume)
            self.kube.delete(path, {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                                    "preconditions": {"uid": meta["uid"]}})
            return
        if not node.runtime_up:
            return
        status = pod.get("status") or {}
        if status.get("phase") == "Running":
            if any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ()):
                return
            # The node controller marks a NotReady node's pods not Ready; once the node reports again, the
            # kubelet's status manager puts back the status it holds: Running and Ready.
        else:
            volumes = self._pod_volumes(pod)
            if volumes is None or not set(volumes) <= attached:
                return  # waiting for the attach-detach controller, as the kubelet's volume manager does
            in_use.extend(v for v in volumes if v not in in_use)
        stamp = now_text(offset=node.clock_offset)
        containers = [c["name"] for c in (pod.get("spec") or {}).get("containers") or ()]
        self.kube.patch(f"{path}/status", {"status": {
            "phase": "Running", "hostIP": node.address, "podIP": node.address, "startTime": stamp,
            "conditions": [{"type": t, "status": "True", "lastTransitionTime": stamp}
                           for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
            "containerStatuses": [{"name": c, "ready": True, "restartCount": 0, "image": "sim", "imageID": "sim",
                                   "started": True, "state": {"running": {"startedAt": stamp}}}
                                  for c in containers]}}, content_type=STRATEGIC)

    def _attacher(self) -> None:
        for va in self.kube.items("/apis/storage.k8s.io/v1/volumeattachments"):
            if (va.get("spec") or {}).get("attacher") != DRIVER:
                continue
            meta, path = va["metadata"], f"/apis/storage.k8s.io/v1/volumeattachments/{va['metadata']['name']}"
            finalizers = meta.get("finalizers") or []
            if meta.get("deletionTimestamp"):
                if FINALIZER in finalizers:  # ControllerUnpublishVolume done: let it go
                    self._unpublish(va)
                    self.kube.patch(path, {"metadata": {"finalizers": [f for f in finalizers if f != FINALIZER],
                                                        "resourceVersion": meta["resourceVersion"]}})
                continue
            if FINALIZER not in finalizers:
                va = self.kube.patch(path, {"metadata": {"finalizers": finalizers + [FINALIZER],
                                                         "resourceVersion": meta["resourceVersion"]}})
            if not (va.get("status") or {}).get("attached"):  # ControllerPublishVolume done
                self.kube.patch(f"{path}/status", {"status": {"attached": True}})


    def _unpublish(self, va: dict) -> None:
        """ControllerUnpublishVolume, as ceph-csi 3.15+ does it: it fences (blocklists) the node's clients only
        if the node carries the out-of-service taint at this moment. Recorded: (attachment, node, fenced)."""
        node_name = (va.get("spec") or {}).get("nodeName", "")
        node = self.kube.get(f"/api/v1/nodes/{node_name}") or {}
        tainted = any(t.get("key") == OUT_OF_SERVICE_KEY for t in (node.get("spec") or {}).get("taints") or ())
        if (va["metadata"]["name"], node_name) not in {(n, m) for n, m, _ in self.unpublished}:
            self.unpublished.append((va["metadata"]["name"], node_name, tainted))


class FenceController(Background):
    """A simulated csi-addons NetworkFence controller: it answers each spec generation after `delay` seconds,
    as the real one does once the CSI driver's FenceClusterNetwork (or Unfence) call returns: status.result and
    the upstream success messages, and nothing else. (csi-addons' networkfence_controller.go writes no
    conditions and no observedGeneration; `conditions=True` adds a condition that carries it, as a controller
    that does would.)"""

    def __init__(self, kubeconfig: Path, delay: float = 2.0, tick: float = 0.25, *, conditions: bool = False) -> None:
        self.kube, self.delay, self.period, self.conditions = Kube(kubeconfig), delay, tick, conditions
        self.first_seen: dict[tuple[str, int], float] = {}
        self.answered: set[tuple[str, int]] = set()

    def tick(self) -> None:
        try:
            for fence in self.kube.items("/apis/csiaddons.openshift.io/v1alpha1/networkfences"):
                self._answer(fence)
        except (KubeError, OSError, urllib3.exceptions.HTTPError):
            pass  # the next tick tries again, as a controller's requeue does

    def _answer(self, fence: dict) -> None:
        meta, generation = fence["metadata"], int(fence["metadata"].get("generation") or 1)
        key = (meta["uid"], generation)  # the controller reconciles each generation once (GenerationChanged)
        if key in self.answered:
            return
        seen = self.first_seen.setdefault(key, time.monotonic())
        if time.monotonic() - seen < self.delay:
            return
        unfence = fence["spec"]["fenceState"] == "Unfenced"
        message = "unfencing operation successful" if unfence else "fencing operation successful"
        status: dict = {"result": "Succeeded", "message": message}
        if self.conditions:
            status["conditions"] = [{"type": "Fenced", "status": "False" if unfence else "True",
                                     "reason": "Succeeded", "message": message, "observedGeneration": generation,
                                     "lastTransitionTime": now_text()}]
        self.kube.patch(f"/apis/csiaddons.openshift.io/v1alpha1/networkfences/{meta['name']}/status",
                        {"status": status})
        self.answered.add(key)