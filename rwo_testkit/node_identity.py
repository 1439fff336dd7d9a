"""A node acting with its own kubelet credential on the e2e tier's real API server.

`OwnKubelet(cp, name)` plays one node's kubelet just as `node_sim.NodeSimulator` does (registration, Lease
renewals, status posts, its pods), but authenticated as `system:node:NAME` in `system:nodes`
(`ControlPlane.node_kubeconfig`), so the Node authorizer and the NodeRestriction admission plugin judge every
write as they judge a real kubelet's. The CSI attacher stays on the control-plane side (the admin simulator's).
`refused` lists what the server refused it: a simulated kubelet that needs more than a real one may do would
show there.

`answer(kube, method, path, body=...)` is what the server answers one request: its HTTP status and, when it refuses,
its message (a Status object's `message`), so a test can assert which rule refused it.
`claim_reboot` is the forgery a stolen kubelet credential allows: a new bootID without a reboot.
"""

from __future__ import annotations

import json
from typing import Any

from .control_plane import ControlPlane
from .kube import MERGE, Kube
from .node_sim import NodeSimulator, SimNode

# Addresses the admin simulator never gives (it counts up from 10.99.0.3): one block of ten per OwnKubelet.
_ADDRESS_BASE = 100
_instances = 0


def answer(kube: Kube, method: str, path: str, *, body: Any = None, content_type: str = "") -> tuple[int, str]:
    """The server's answer to one request: its status, and its message when it is not a success ("" when it is).
    A PATCH is a JSON merge patch unless `content_type` says otherwise."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type or (MERGE if method == "PATCH" else "application/json")
    request = kube.api.param_serialize(method=method, resource_path=path, query_params=[], header_params=headers,
                                       body=body, auth_settings=["BearerToken"])
    response = kube.api.call_api(*request, _request_timeout=(10, 30))
    data = response.read()
    response.response.release_conn()
    if 200 <= response.status <= 299:
        return response.status, ""
    try:
        return response.status, str(json.loads(data).get("message", ""))
    except ValueError:
        return response.status, data.decode("utf-8", "replace")[:500]


class OwnKubelet(NodeSimulator):
    """`with OwnKubelet(cp, "n1", lease_seconds=10) as kubelet: kubelet.register()`; `kubelet.kube` is the node's
    own client. One node, one credential, one background loop."""

    def __init__(self, cp: ControlPlane, name: str, lease_seconds: int) -> None:
        global _instances
        super().__init__(cp.node_kubeconfig(name), lease_seconds=lease_seconds)
        self.name, self.admin = name, Kube(cp.kubeconfig)
        self._added = _ADDRESS_BASE + 10 * _instances  # add_node counts on from here: an address no one else has
        _instances += 1

    def install_storage(self) -> None:
        """Nothing: the CSIDriver and StorageClass are the admin's (a kubelet may not write them)."""

    def _attacher(self) -> None:
        """Nothing: the CSI external-attacher runs on the control-plane side, as the admin simulator's."""

    @property
    def node(self) -> SimNode:
        return self.nodes[self.name]

    @property
    def refused(self) -> list[str]:
        return [e for e in self.errors if e.startswith("HTTP 403")]

    def register(self, labels: dict | None = None) -> None:
        """The kubelet registers its Node (a create with its own credential), renews its Lease, posts status."""
        self.add_node(self.name, labels)

    def claim_reboot(self) -> str:
        """Report a new bootID without any reboot, as a kubelet whose credential is stolen can; the bootID now."""
        with self.lock:
            self.node.boots += 1
            self.node.last_status = 0.0  # posted at the next tick
            return self.node.boot_id

    def remove(self) -> None:
        """Stop playing the node; the admin deletes its Node and Lease (a kubelet may not delete its Node)."""
        with self.lock:
            self.nodes.pop(self.name, None)
        self.admin.delete(f"/api/v1/nodes/{self.name}")
        self.admin.delete(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{self.name}")
