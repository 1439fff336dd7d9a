"""The calls a pass makes, each naming its RBAC verb and resource (tests/test_rbac.py checks them)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import Any, TypeVar

from kubernetes import watch as k8s_watch

from ..model import BadObject, Json, parse_time
from . import keep, shapes
from .errors import Unavailable
from .lists import Event, Lister

LEASE_NAMESPACE = "kube-node-lease"
NETWORK_FENCES = "/apis/csiaddons.openshift.io/v1alpha1/networkfences"
ELECTION_LEASES = "leases (leader election)"  # named apart: their RBAC is another Role, in another namespace
RECOVERY_RECORDS = "configmaps (recovery records)"  # a Role in RECOVERY_NAMESPACE only, where tenants cannot write
# Our records of the out-of-service taints we added: the same Role, in the same namespace; read back by a
# name-selected list, so no new grant (a GET would need one).
TAINT_RECORDS = "configmaps (taint records)"
# The control ConfigMap (pause, storm cool-down) in the same namespace, read by a name-selected list: the same
# Role's list, watch, create and patch, and no new grant (a GET would need one).
CONTROL = "configmaps (control)"

# PVCs and VolumeAttachments are ~1 KB against ~9 KB for a node or ~5 KB for a pod, so their pages can be
# ten times longer for the same memory per page, and a big cluster's lists take ten times fewer requests.
SMALL_OBJECT_PAGE_FACTOR = 10
T = TypeVar("T")


def parse_version(git_version: str) -> tuple[int, int] | None:
    """'v1.29.3-eks-abc' -> (1, 29); None when it does not start with major.minor."""
    found = re.match(r"v?(\d+)\.(\d+)", git_version.strip())
    return (int(found[1]), int(found[2])) if found else None


class Api(Lister):
    """The calls a pass makes, each retried within bounds and charged to one deadline (transport.Transport)."""

    def list_nodes(self, convert: Callable[[dict[str, Any]], T], consistent: bool | None = None) -> list[T]:
        return self.list_all("nodes", "/api/v1/nodes", shapes.Node, convert=convert, consistent=consistent)

    def watch_nodes(self, version: str, timeout_seconds: int, watcher: k8s_watch.Watch) -> Iterator[Event]:
        return self.watch("nodes", "/api/v1/nodes", version, timeout_seconds=timeout_seconds, watcher=watcher)

    def latest_node_version(self) -> str:
        """The nodes' resourceVersion now (a consistent list of one node): what a watch of them must reach."""
        return self.latest_version("nodes", "/api/v1/nodes", shapes.Node)

    def read_node(self, name: str) -> dict[str, Any] | None:
        return self.call("get", "nodes", "GET", f"/api/v1/nodes/{name}")

    def read_lease(self, node: str) -> dict[str, Any] | None:
        return self.call("get", f"leases in {LEASE_NAMESPACE}", "GET",
                         f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{node}")

    def list_node_leases(self, convert: Callable[[dict[str, Any]], T]) -> list[T]:
        """Every node's Lease (one-shot mode's early sign of an outage: planner/quiet.py)."""
        return self.list_all("leases", f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases",
                             shapes.Lease, convert=convert, page_factor=SMALL_OBJECT_PAGE_FACTOR, consistent=False)

    def list_pods_on(self, node: str, convert: Callable[[dict[str, Any]], T], consistent: bool | None = None, *,
                     mounting: tuple[AbstractSet[str], AbstractSet[str]] | None = None) -> list[T]:
        """The pods bound to a node; with `mounting`, only those kube.keep.mounting keeps."""
        return self.list_all("pods", "/api/v1/pods", shapes.Pod, convert=convert,
                             query=[("fieldSelector", f"spec.nodeName={node}")], consistent=consistent,
                             keep=None if mounting is None else keep.mounting(*mounting))

    def watch_pods_on(self, node: str, version: str, timeout_seconds: int, *,
                      watcher: k8s_watch.Watch) -> Iterator[Event]:
        return self.watch("pods", "/api/v1/pods", version, timeout_seconds=timeout_seconds, watcher=watcher,
                          query=[("fieldSelector", f"spec.nodeName={node}")])

    def read_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.read("persistentvolumeclaims", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}",
                         shapes.Claim)

    def list_claims(self, convert: Callable[[dict[str, Any]], T], only: AbstractSet[tuple[str, str]] | None = None
                    ) -> list[T]:
        """Every claim, or (`only`) those named (namespace, name) and any whose name cannot be told."""
        return self.list_all("persistentvolumeclaims", "/api/v1/persistentvolumeclaims", shapes.Claim, convert=convert,
                             page_factor=SMALL_OBJECT_PAGE_FACTOR, keep=None if only is None else keep.named_in(only))

    def list_pods_in(self, namespace: str, convert: Callable[[dict[str, Any]], T],
                     mounting: tuple[AbstractSet[str], AbstractSet[str]] | None = None, *,
                     consistent: bool | None = None) -> list[T]:
        """The namespace's pods, or (`mounting`: claim names, uids) those mounting one of the claims or with one of
        the uids, and any whose volumes cannot be told."""
        return self.list_all("pods", f"/api/v1/namespaces/{namespace}/pods", shapes.Pod, convert=convert,
                             keep=None if mounting is None else keep.mounting(*mounting), consistent=consistent)

    def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.read("pods", f"/api/v1/namespaces/{namespace}/pods/{name}", shapes.Pod)

    def read_volume(self, name: str) -> dict[str, Any] | None:
        return self.read("persistentvolumes", f"/api/v1/persistentvolumes/{name}", shapes.Volume)

    def list_volumes(self, convert: Callable[[dict[str, Any]], T], only: AbstractSet[str] | None = None) -> list[T]:
        """Every PV, or (`only`) those named and any whose name cannot be told."""
        return self.list_all("persistentvolumes", "/api/v1/persistentvolumes", shapes.Volume, convert=convert,
                             page_factor=SMALL_OBJECT_PAGE_FACTOR, keep=None if only is None else keep.named(only))

    def list_attachments(self, convert: Callable[[dict[str, Any]], T], nodes: AbstractSet[str] | None = None,
                         volumes: AbstractSet[str] = frozenset()) -> list[T]:
        """Every VolumeAttachment (they have no node field selector), or (`nodes`) those on these nodes or of
        these PVs, and any whose node or PV cannot be told."""
        return self.list_all("volumeattachments", "/apis/storage.k8s.io/v1/volumeattachments", shapes.Attachment,
                             convert=convert, page_factor=SMALL_OBJECT_PAGE_FACTOR,
                             keep=None if nodes is None else keep.on(nodes, volumes))

    def delete_pod(self, namespace: str, name: str, uid: str) -> dict[str, Any] | None:
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
        return self.call("delete", "pods", "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}",
                         query=[("gracePeriodSeconds", 0)], body=body)

    def find_attachment(self, name: str) -> dict[str, Any] | None:
        """One VolumeAttachment by name, or None: a consistent list by metadata.name (RBAC grants list, not get)."""
        found = self.list_all("volumeattachments", "/apis/storage.k8s.io/v1/volumeattachments", shapes.Attachment,
                              convert=lambda obj: obj, query=[("fieldSelector", f"metadata.name={name}")],
                              consistent=True)
        return found[0] if found else None

    def delete_attachment(self, name: str, uid: str) -> dict[str, Any] | None:
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
        return self.call("delete", "volumeattachments", "DELETE", f"/apis/storage.k8s.io/v1/volumeattachments/{name}",
                         body=body)

    def patch_node(self, name: str, patch: Json) -> dict[str, Any] | None:
        """A JSON merge patch; put metadata.resourceVersion in it to make it fail (409) on a stale read."""
        return self.call("patch", "nodes", "PATCH", f"/api/v1/nodes/{name}", body=patch,
                         content_type="application/merge-patch+json")

    def server_stamp(self) -> tuple[datetime, datetime | None]:
        """The API server's own time, and the Date header of the same answer: a server-side dry-run create of an
        Event (stored nowhere; `create events` is already ours) comes back stamped by the server's clock, the
        clock that stamps every Lease and node status we judge."""
        event = {"metadata": {"generateName": "rwo-failover-clock-"}, "type": "Normal", "reason": "ClockCheck",
                 "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": "rwo-failover-clock-check"},
                 "message": "a dry run: stored nowhere", "source": {"component": "rwo-failover"}}
        found = self.call("create", "events", "POST", "/api/v1/namespaces/default/events", query=[("dryRun", "All")],
                          body=dict(event, apiVersion="v1", kind="Event"))
        meta = found.get("metadata") if isinstance(found, dict) else None
        try:
            stamp = parse_time(meta.get("creationTimestamp") if isinstance(meta, dict) else None)
        except BadObject:
            stamp = None
        if stamp is None:
            raise Unavailable("create events (a server-side dry run, to read the API server's own time): the "
                              "answer carries no creationTimestamp")
        return stamp, self.server_clock.last_date

    def dry_run_create(self, what: str, path: str, body: Json) -> None:
        """A server-side dry run of a create (stored nowhere): ApiError (404) when the namespace or the API the
        create needs does not exist, as the real create would get. One attempt: an unreachable server is the
        pass's to find out, and must not cost its deadline twice."""
        self.call("create", what, "POST", path, query=[("dryRun", "All")], body=body, attempts=1)

    def server_version(self) -> tuple[int, int] | None:
        """(major, minor) from /version, a non-resource URL every authenticated client may read."""
        found = self.call("get", "/version", "GET", "/version") or {}
        return parse_version(str(found.get("gitVersion", "")))

    # Fencing with FENCING=networkfence; RBAC in the optional deploy/components/networkfence.
    def list_networkfences(self, convert: Callable[[dict[str, Any]], T], consistent: bool | None = None) -> list[T]:
        return self.list_all("networkfences", NETWORK_FENCES, shapes.Fence, convert=convert, consistent=consistent)

    def watch_networkfences(self, version: str, timeout_seconds: int, watcher: k8s_watch.Watch) -> Iterator[Event]:
        return self.watch("networkfences", NETWORK_FENCES, version, timeout_seconds=timeout_seconds, watcher=watcher)

    def read_networkfence(self, name: str) -> dict[str, Any] | None:
        return self.call("get", "networkfences", "GET", f"{NETWORK_FENCES}/{name}")

    def create_networkfence(self, body: Json) -> dict[str, Any] | None:
        return self.call("create", "networkfences", "POST", NETWORK_FENCES, body=body)

    def patch_networkfence(self, name: str, patch: Json) -> dict[str, Any] | None:
        return self.call("patch", "networkfences", "PATCH", f"{NETWORK_FENCES}/{name}", body=patch,
                         content_type="application/merge-patch+json")

    def delete_networkfence(self, name: str, uid: str, resource_version: str) -> dict[str, Any] | None:
        """Preconditioned on the object read: 409 when the fence changed, or was replaced, since."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions",
                "preconditions": {"uid": uid, "resourceVersion": resource_version}}
        return self.call("delete", "networkfences", "DELETE", f"{NETWORK_FENCES}/{name}", body=body)

    # Recovery records: ConfigMaps in RECOVERY_NAMESPACE (a Role there; tenants cannot write them).
    def list_recovery_records(self, namespace: str, label: str, convert: Callable[[dict[str, Any]], T], *,
                              consistent: bool | None = None) -> list[T]:
        return self.list_all(RECOVERY_RECORDS, f"/api/v1/namespaces/{namespace}/configmaps", shapes.Record,
                             convert=convert, page_factor=SMALL_OBJECT_PAGE_FACTOR, query=[("labelSelector", label)],
                             consistent=consistent)

    def watch_recovery_records(self, namespace: str, label: str, version: str, *, timeout_seconds: int,
                               watcher: k8s_watch.Watch) -> Iterator[Event]:
        return self.watch(RECOVERY_RECORDS, f"/api/v1/namespaces/{namespace}/configmaps", version,
                          timeout_seconds=timeout_seconds, watcher=watcher, query=[("labelSelector", label)])

    def create_recovery_record(self, namespace: str, body: Json) -> dict[str, Any] | None:
        return self.call("create", RECOVERY_RECORDS, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body=body)

    def patch_recovery_record(self, namespace: str, name: str, patch: Json) -> dict[str, Any] | None:
        return self.call("patch", RECOVERY_RECORDS, "PATCH", f"/api/v1/namespaces/{namespace}/configmaps/{name}",
                         body=patch, content_type="application/merge-patch+json")

    def delete_recovery_record(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.call("delete", RECOVERY_RECORDS, "DELETE", f"/api/v1/namespaces/{namespace}/configmaps/{name}")

    # Taint records: ConfigMaps in RECOVERY_NAMESPACE labelled TAINT_RECORD_LABEL, one per Node object we tainted.
    def list_taint_records(self, namespace: str, label: str, convert: Callable[[dict[str, Any]], T], *,
                           consistent: bool | None = None) -> list[T]:
        return self.list_all(TAINT_RECORDS, f"/api/v1/namespaces/{namespace}/configmaps", shapes.Record,
                             convert=convert, page_factor=SMALL_OBJECT_PAGE_FACTOR, query=[("labelSelector", label)],
                             consistent=consistent)

    def watch_taint_records(self, namespace: str, label: str, version: str, *, timeout_seconds: int,
                            watcher: k8s_watch.Watch) -> Iterator[Event]:
        return self.watch(TAINT_RECORDS, f"/api/v1/namespaces/{namespace}/configmaps", version,
                          timeout_seconds=timeout_seconds, watcher=watcher, query=[("labelSelector", label)])

    def find_taint_record(self, namespace: str, name: str, convert: Callable[[dict[str, Any]], T]) -> list[T]:
        """The record of that name, read now (a consistent, name-selected list): none, or one."""
        return self.list_all(TAINT_RECORDS, f"/api/v1/namespaces/{namespace}/configmaps", shapes.Record,
                             convert=convert, query=[("fieldSelector", f"metadata.name={name}")], consistent=True)

    def create_taint_record(self, namespace: str, body: Json) -> dict[str, Any] | None:
        return self.call("create", TAINT_RECORDS, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body=body)

    def patch_taint_record(self, namespace: str, name: str, patch: Json) -> dict[str, Any] | None:
        """A merge patch carrying metadata.resourceVersion: 409 when the record changed since our read."""
        return self.call("patch", TAINT_RECORDS, "PATCH", f"/api/v1/namespaces/{namespace}/configmaps/{name}",
                         body=patch, content_type="application/merge-patch+json")

    def delete_taint_record(self, namespace: str, name: str, uid: str, *, resource_version: str
                            ) -> dict[str, Any] | None:
        """Preconditioned on the record judged: 409 when it was written again since."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions",
                "preconditions": {"uid": uid, "resourceVersion": resource_version}}
        return self.call("delete", TAINT_RECORDS, "DELETE", f"/api/v1/namespaces/{namespace}/configmaps/{name}",
                         body=body)

    # The control ConfigMap: read and watched by its name, written with its resourceVersion as precondition.
    def list_control(self, namespace: str, name: str, convert: Callable[[dict[str, Any]], T], *,
                     consistent: bool | None = None) -> list[T]:
        return self.list_all(CONTROL, f"/api/v1/namespaces/{namespace}/configmaps", shapes.Control, convert=convert,
                             query=[("fieldSelector", f"metadata.name={name}")], consistent=consistent)

    def watch_control(self, namespace: str, name: str, version: str, *, timeout_seconds: int,
                      watcher: k8s_watch.Watch) -> Iterator[Event]:
        return self.watch(CONTROL, f"/api/v1/namespaces/{namespace}/configmaps", version,
                          timeout_seconds=timeout_seconds, watcher=watcher,
                          query=[("fieldSelector", f"metadata.name={name}")])

    def create_control(self, namespace: str, body: Json) -> dict[str, Any] | None:
        return self.call("create", CONTROL, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body=body)

    def patch_control(self, namespace: str, name: str, patch: Json) -> dict[str, Any] | None:
        """A merge patch carrying metadata.resourceVersion: 409 when someone wrote since our read."""
        return self.call("patch", CONTROL, "PATCH", f"/api/v1/namespaces/{namespace}/configmaps/{name}", body=patch,
                         content_type="application/merge-patch+json")

    # Leader election (continuous mode with LEADER_ELECTION=true); RBAC in deploy/ha, one namespace only.
    def read_namespaced_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.call("get", ELECTION_LEASES, "GET",
                         f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}")

    def create_namespaced_lease(self, namespace: str, body: Json) -> dict[str, Any] | None:
        return self.call("create", ELECTION_LEASES, "POST",
                         f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", body=body)

    def update_namespaced_lease(self, namespace: str, name: str, body: Json) -> dict[str, Any] | None:
        """A PUT carrying metadata.resourceVersion: 409 when someone else wrote since our read."""
        return self.call("update", ELECTION_LEASES, "PUT",
                         f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}", body=body)

    def read_event(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.call("get", "events", "GET", f"/api/v1/namespaces/{namespace}/events/{name}")

    def patch_event(self, namespace: str, name: str, patch: Json) -> dict[str, Any] | None:
        return self.call("patch", "events", "PATCH", f"/api/v1/namespaces/{namespace}/events/{name}", body=patch,
                         content_type="application/merge-patch+json")

    def create_event(self, namespace: str, event: Json) -> dict[str, Any] | None:
        return self.call("create", "events", "POST", f"/api/v1/namespaces/{namespace}/events",
                         body=dict(event, apiVersion="v1", kind="Event"))
