"""Builders for realistic cluster objects, shared by the tests, the demo and the benchmark."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from rwo_failover.model import CLOUD_SHUTDOWN_KEY, OUT_OF_SERVICE_KEY, OUT_OF_SERVICE_VALUE

from .fake_apiserver import FakeApiServer
from .fake_lifecycle import attacher_finalizer
from .managed_fields import entry

RECOVERY_NAMESPACE = "rwo-failover"  # RECOVERY_NAMESPACE's default: where our records live

SHUTDOWN = {"key": CLOUD_SHUTDOWN_KEY, "effect": "NoSchedule"}
OUT_OF_SERVICE = {"key": OUT_OF_SERVICE_KEY, "value": OUT_OF_SERVICE_VALUE, "effect": "NoExecute"}
UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}


def stamp(seconds_ago: float, now: datetime | None = None) -> str:
    moment = (now or datetime.now(UTC)) - timedelta(seconds=seconds_ago)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_stamp(seconds_ago: float, now: datetime | None = None) -> str:
    moment = (now or datetime.now(UTC)) - timedelta(seconds=seconds_ago)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def machine_uuid(name: str) -> str:
    """The SMBIOS UUID of the machine named `name`, as the kubelet reports it in status.nodeInfo.systemUUID
    (lowercase, dashed) and as RedfishEmulator's ComputerSystem of that name answers it."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, name))


def node(name: str, ready: str = "True", since: float = 3600, *, taints: Sequence[dict] = (),
         images: int = 0, clock_offset: float = 0.0, tainted_ago: float | None = None,
         machine: str | None = None) -> dict:
    """A node whose Ready condition became `ready` `since` seconds ago, with its status last written then.

    As on a real cluster: Ready=Unknown is the node lifecycle controller's write ("Kubelet stopped posting
    node status"), timed by the control plane; True and False are the kubelet's own posts, timed by its clock,
    `clock_offset` seconds off the server's. The server stamps each write's managedFields entry on its own
    clock, which is what rwo-failover times liveness by.

    Taints are written to the node itself (not its status): the server stamps that write too. By default the
    taints were added when Ready last changed (the node lifecycle controller adds its unreachable taint with
    its Ready=Unknown; a cloud's shutdown taint comes once the instance has stopped); `tainted_ago` says
    otherwise. Its systemUUID is that of the machine named `machine` (by default its own name)."""
    kubelet = lambda ago: stamp(ago - clock_offset)  # noqa: E731 - the kubelet's clock
    controller = ready == "Unknown"
    conditions = [{"type": t, "status": "False", "reason": f"Kubelet{t}", "message": f"kubelet reports {t}",
                   "lastHeartbeatTime": kubelet(since), "lastTransitionTime": kubelet(86400)}
                  for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")]
    conditions.append({"type": "Ready", "status": ready,
                       "reason": "NodeStatusUnknown" if controller else "KubeletReady" if ready == "True"
                       else "KubeletNotReady",
                       "message": "Kubelet stopped posting node status." if controller else "kubelet status",
                       "lastHeartbeatTime": kubelet(since + 40 if controller else since),
                       "lastTransitionTime": stamp(since) if controller else kubelet(since)})
    managed = [entry("kubelet", stamp(86400 * 30)), entry("kube-controller-manager", stamp(86400 * 30)),
               entry("kubelet", stamp(since + 40 if controller else since), "status")]
    if controller:
        managed.append(entry("kube-controller-manager", stamp(since), "status"))
    if taints:
        managed.append(entry("cloud-controller-manager", stamp(since if tainted_ago is None else tainted_ago)))
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                  "node.kubernetes.io/instance-type": "m6i.2xlarge",
                                                  "topology.kubernetes.io/zone": "eu-west-1a"},
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                                         "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
                         "managedFields": managed},
            "spec": {"podCIDR": "10.244.0.0/24", "providerID": f"aws:///eu-west-1a/i-{_hex(name, 17)}",
                     "taints": list(taints)},
            "status": {"conditions": conditions,
                       "capacity": {"cpu": "8", "memory": "32386524Ki", "pods": "110"},
                       "allocatable": {"cpu": "7910m", "memory": "31371740Ki", "pods": "110"},
                       "addresses": [{"type": "InternalIP", "address": internal_ip(name)},
                                     {"type": "Hostname", "address": name}],
                       "nodeInfo": {"kubeletVersion": "v1.36.0", "containerRuntimeVersion": "containerd://2.1.0",
                                    "kernelVersion": "6.8.0", "osImage": "Ubuntu 24.04 LTS",
                                    "architecture": "amd64", "operatingSystem": "linux",
                                    "machineID": _hex(name, 32), "systemUUID": machine_uuid(machine or name),
                                    "bootID": _hex(name + "b", 32), "kubeProxyVersion": "v1.36.0"},
                       "images": [{"names": [f"registry.example.com/team/app-{i}@sha256:{_hex(name + str(i), 64)}",
                                             f"registry.example.com/team/app-{i}:v{i}.2.3"],
                                   "sizeBytes": 123456789 + i} for i in range(images)]}}


def _hex(seed: str, length: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:length]


def internal_ip(name: str) -> str:
    """Each node its own address, as on a real network (fencing refuses an address two nodes report)."""
    digest = hashlib.sha256(name.encode()).digest()
    return f"10.{digest[0]}.{digest[1]}.{digest[2] % 254 + 1}"


def lease(node_name: str, renewed_ago: float | None, duration: int | None = 40, *,
          clock_offset: float = 0.0) -> dict:
    """A node Lease as the kubelet keeps it, last renewed `renewed_ago` seconds ago by the server's clock.

    renewTime is the kubelet's own clock (`clock_offset` seconds off the server's); the server stamps the
    write's managedFields time. `duration=None` leaves leaseDurationSeconds out."""
    spec: dict[str, Any] = {"holderIdentity": node_name}
    if duration is not None:
        spec["leaseDurationSeconds"] = duration
    if renewed_ago is not None:
        spec["renewTime"] = micro_stamp(renewed_ago - clock_offset)
    written = stamp(86400 * 30 if renewed_ago is None else renewed_ago)
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": node_name, "namespace": "kube-node-lease",
                         "managedFields": [entry("kubelet", written, api_version="coordination.k8s.io/v1")]},
            "spec": spec}


def pod(name: str, node_name: str, namespace: str = "default", *, claims: Iterable[str] = (),
        ephemeral: Iterable[str] = (), owner: str | None = "StatefulSet", terminating: bool = False,
        phase: str = "Running", ready: str = "False", reason: str | None = None,
        labels: dict | None = None, annotations: dict | None = None, kubelet_ran: bool = True) -> dict:
    """A pod; by default its kubelet ran it (status.startTime and the rest, which only the kubelet writes).
    `kubelet_ran=False`: a pod bound to a node that was already down, as the API server keeps it (a create
    resets status: phase Pending, and only what the pod's `phase` and `reason` say here)."""
    volumes: list[dict] = [{"name": f"vol-{c}", "persistentVolumeClaim": {"claimName": c}} for c in claims]
    volumes += [{"name": v, "ephemeral": {"volumeClaimTemplate": {"spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}} for v in ephemeral]
    volumes.append({"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}})
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {"app": name.rsplit("-", 1)[0]},
                            "annotations": annotations or {}}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": name.rsplit("-", 1)[0],
                                    "uid": _hex(name, 32), "controller": True, "blockOwnerDeletion": True}]
    if terminating:
        meta["deletionTimestamp"] = stamp(120)
        meta["deletionGracePeriodSeconds"] = 30
    status: dict[str, Any] = {"phase": phase, "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp(7200)},
        {"type": "Ready", "status": ready, "lastTransitionTime": stamp(300)}],
        "hostIP": "10.0.0.1", "podIP": "10.244.1.7", "startTime": stamp(7200),
        "containerStatuses": [{"name": "main", "ready": ready == "True", "restartCount": 0,
                               "image": "registry.example.com/team/app:v1", "imageID": "sha256:" + _hex(name, 64),
                               "state": {"running": {"startedAt": stamp(7200)}}}]}
    if not kubelet_ran:
        status = {"phase": phase, "qosClass": "Burstable"}
    if reason:
        status["reason"] = reason
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node_name, "volumes": volumes, "terminationGracePeriodSeconds": 30,
                     "serviceAccountName": "default", "restartPolicy": "Always",
                     "containers": [{"name": "main", "image": "registry.example.com/team/app:v1",
                                     "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                                     "volumeMounts": [{"name": v["name"], "mountPath": f"/data/{v['name']}"}
                                                      for v in volumes]}]},
            "status": status}


def claim(name: str, namespace: str = "default", modes: Sequence[str] = ("ReadWriteOnce",), *,
          volume: str | None = None, annotations: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
            "spec": {"accessModes": list(modes), "resources": {"requests": {"storage": "10Gi"}},
                     "storageClassName": "standard", "volumeName": volume or f"pv-{namespace}-{name}"},
            "status": {"phase": "Bound", "accessModes": list(modes), "capacity": {"storage": "10Gi"}}}


def volume(name: str, claim_name: str, namespace: str = "default", *, modes: Sequence[str] = ("ReadWriteOnce",),
           csi: bool = True, claim_uid: str | None = None) -> dict:
    source: dict[str, Any] = ({"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{_hex(name, 17)}"}}
                              if csi else {"nfs": {"server": "nfs.example.com", "path": f"/exports/{name}"}})
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": dict(source, accessModes=list(modes), capacity={"storage": "10Gi"},
                         claimRef={"kind": "PersistentVolumeClaim", "namespace": namespace, "name": claim_name,
                                   **({"uid": claim_uid} if claim_uid else {})},
                         persistentVolumeReclaimPolicy="Delete"),
            "status": {"phase": "Bound"}}


ATTACHED_AGO = 7 * 86400  # attachments are made by default while their node was alive, before any test stops it


def attachment(pv_name: str, node_name: str, attached: bool = True, *,
               created_ago: float | None = ATTACHED_AGO) -> dict:
    """A VolumeAttachment the server created `created_ago` seconds ago (None: when it is added, now)."""
    # The external-attacher puts its finalizer on every attachment it handles: a delete only marks it, until the
    # attacher has detached the volume (FakeApiServer.attacher.detach).
    meta: dict[str, Any] = {"name": "csi-" + _hex(pv_name + node_name, 64),
                            "finalizers": [attacher_finalizer("ebs.csi.aws.com")]}
    if created_ago is not None:
        meta["creationTimestamp"] = stamp(created_ago)
    return {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
            "metadata": meta,
            "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node_name,
                     "source": {"persistentVolumeName": pv_name}},
            "status": {"attached": attached}}


def add_volume(api: FakeApiServer, claim_name: str, namespace: str = "default", *,
               modes: Sequence[str] = ("ReadWriteOnce",), attached_to: str | None = None, csi: bool = True,
               annotations: dict | None = None,
               attached_ago: float | None = ATTACHED_AGO) -> tuple[dict, dict, dict | None]:
    """A bound PVC, its PV, and (for CSI volumes on a node) its VolumeAttachment, made `attached_ago` seconds
    ago (None: now)."""
    pv_name = f"pv-{namespace}-{claim_name}"
    pvc = api.add(claim(claim_name, namespace, modes, volume=pv_name, annotations=annotations))
    pv = api.add(volume(pv_name, claim_name, namespace, modes=modes, csi=csi, claim_uid=pvc["metadata"]["uid"]))
    va = api.add(attachment(pv_name, attached_to, created_ago=attached_ago)) if attached_to and csi else None
    return pvc, pv, va


def our_taint(added_at: str = "2026-11-21T10:00:00Z") -> dict:
    """The out-of-service taint exactly as rwo-failover writes it; pair it with `mark_ours`."""
    return dict(OUT_OF_SERVICE, timeAdded=added_at)


BOOT_BEFORE = "0" * 32  # the bootID mark_ours records by default: the machine has rebooted since


def rebooted(node_obj: dict, boot_id: str | None = None) -> dict:
    """The node as its kubelet reports it after a reboot: another status.nodeInfo.bootID (a fresh one, or
    `boot_id`). The node, changed."""
    node_obj["status"]["nodeInfo"]["bootID"] = boot_id or str(uuid.uuid4())
    return node_obj


def mark_ours(api: FakeApiServer, node_obj: dict, added_at: str = "2026-11-21T10:00:00Z", *,
              boot_id: str | None = BOOT_BEFORE, uid: str | None = None, bmc_off_at: str = "",
              namespace: str = RECOVERY_NAMESPACE) -> dict:
    """Our record of our taint, as rwo-failover writes it before adding the taint (a ConfigMap in RECOVERY_NAMESPACE,
    added to `api`): when, and the machine then. By default for this Node object (its uid, given one if it has
    none yet) before a reboot (another bootID); `boot_id=None` records the node's bootID now (it has not rebooted);
    `uid` records another Node object. Returns the node, to add."""
    meta = node_obj["metadata"]
    meta.setdefault("uid", str(uuid.uuid4()))
    now_boot = node_obj["status"]["nodeInfo"]["bootID"]
    record = {"node": meta["name"], "nodeUID": meta["uid"] if uid is None else uid,
              "bootID": now_boot if boot_id is None else boot_id,
              "addresses": ",".join(f"{a['type']}={a['address']}" for a in node_obj["status"]["addresses"]),
              "addedAt": added_at, "bmcOffAt": bmc_off_at}
    api.add({"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": f"rwo-taint-{record['nodeUID']}", "namespace": namespace,
                          "labels": {"rwo-failover.io/taint-record": "true"}},
             "data": {"record": json.dumps(record, sort_keys=True)}})
    return node_obj


def taint_records(api: FakeApiServer, namespace: str = RECOVERY_NAMESPACE) -> list[dict]:
    """Our taint records, as stored."""
    return [json.loads(c["data"]["record"]) for c in api.objects("configmaps")
            if c["metadata"].get("namespace") == namespace and
            (c["metadata"].get("labels") or {}).get("rwo-failover.io/taint-record")]


def inline_attachment(node_name: str) -> dict:
    """A CSI-migration attachment: an in-tree volume spec inline, no PV name."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
            "metadata": {"name": "csi-" + _hex("inline" + node_name, 64), "creationTimestamp": stamp(ATTACHED_AGO),
                         "finalizers": [attacher_finalizer("ebs.csi.aws.com")]},
            "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node_name,
                     "source": {"inlineVolumeSpec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"},
                                                     "accessModes": ["ReadWriteOnce"]}}},
            "status": {"attached": True}}


def dead_node(api: FakeApiServer, name: str, down_for: float = 600, *,
              taints: Sequence[dict] = (SHUTDOWN,)) -> dict:
    """A node that has been NotReady, with an unrenewed Lease, for `down_for` seconds, and carries a taint."""
    created = api.add(node(name, ready="Unknown", since=down_for, taints=list(taints) + [UNREACHABLE]))
    api.add(lease(name, down_for + 40))
    return created


def live_node(api: FakeApiServer, name: str, taints: Sequence[dict] = ()) -> dict:
    created = api.add(node(name, ready="True", since=86400, taints=taints))
    api.add(lease(name, 3))
    return created


def outage(api: FakeApiServer, dead: str = "dead", pods: Sequence[str] = ("db-0",), *, live: int = 3) -> None:
    """`live` healthy nodes, and one dead, tainted node holding stuck StatefulSet pods with attached RWO claims."""
    for i in range(live):
        live_node(api, f"w{i}")
    dead_node(api, dead)
    for name in pods:
        add_volume(api, f"data-{name}", attached_to=dead)
        api.add(pod(name, dead, claims=[f"data-{name}"], terminating=True))


def revive_on_recheck(api: FakeApiServer, name: str) -> None:
    """Bring `name` back (Ready, fresh Lease, still tainted) the moment the pass re-reads it before acting."""
    def revive(req: object) -> None:
        if getattr(req, "verb", "") == "get" and getattr(req, "resource", "") == "nodes":
            api.add(node(name, ready="True", since=1, taints=[SHUTDOWN]))
            api.add(lease(name, 1))
        return None
    api.hooks.append(revive)
