#!/usr/bin/env python3
"""The benchmark's two reference programs, each run as its own process (so its RSS is its own).

    references.py floor KUBECONFIG NEEDS  - read and json.loads exactly the bytes a pass must read, and nothing
                                      else: the node list (paged), the Lease of each tainted node, the pods of
                                      each proven-down node (field-selected), the claims those pods mount and
                                      their PVs (a GET each), and the VolumeAttachment list (it has no node
                                      selector). NEEDS is a JSON file naming them (bench/scale.py writes it).
                                      It is the floor our pass is measured against. It uses the same lean
                                      transport as the pass (ApiClient.param_serialize and call_api), so the
                                      ratio measures our work, not the transport.
    references.py naive KUBECONFIG  - what a straightforward script does: list every node and every pod in
                                      the cluster through the client's default model deserialization, then
                                      filter in Python for stuck pods on tainted nodes.
Both use the same client, page size (500) and kubeconfig as the pass.
"""

import json
import sys

from kubernetes import client, config

PAGE = 500


def api_client(kubeconfig: str) -> client.ApiClient:
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    return client.ApiClient(cfg)


def get(api: client.ApiClient, path: str, query: list) -> dict:
    request = api.param_serialize(method="GET", resource_path=path, query_params=query,
                                  header_params={"Accept": "application/json"}, auth_settings=["BearerToken"])
    return json.loads(api.call_api(*request).read())


def paged(api: client.ApiClient, path: str, page_size: int, *, query: list = ()) -> int:
    count, token = 0, None
    while True:
        page = get(api, path, list(query) + [("limit", page_size),
                                             ("continue", token) if token else ("resourceVersion", "0")])
        count += len(page["items"])
        token = page["metadata"].get("continue")
        if not token:
            return count


def floor(api: client.ApiClient, needs_path: str) -> int:
    with open(needs_path, encoding="utf-8") as handle:
        needs = json.load(handle)
    count = paged(api, "/api/v1/nodes", PAGE)
    for node in needs["tainted"]:
        count += bool(get(api, f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}", []))
    for node in needs["down"]:
        count += paged(api, "/api/v1/pods", PAGE, query=[("fieldSelector", f"spec.nodeName={node}")])
    for namespace, name in needs["claims"]:
        count += bool(get(api, f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}", []))
    for name in needs["volumes"]:
        count += bool(get(api, f"/api/v1/persistentvolumes/{name}", []))
    return count + paged(api, "/apis/storage.k8s.io/v1/volumeattachments", PAGE * 10)


def list_everything(fn) -> list:
    items, token = [], None
    while True:
        page = fn(limit=PAGE, _continue=token) if token else fn(limit=PAGE)
        items.extend(page.items)
        token = page.metadata._continue
        if not token:
            return items


def naive(api: client.ApiClient) -> int:
    core = client.CoreV1Api(api)
    nodes = list_everything(core.list_node)
    tainted = {n.metadata.name for n in nodes
               if any(t.key == "node.cloudprovider.kubernetes.io/shutdown" for t in n.spec.taints or ())}
    pods = list_everything(core.list_pod_for_all_namespaces)
    stuck = [p for p in pods if p.spec.node_name in tainted and p.metadata.deletion_timestamp]
    return len(stuck)


if __name__ == "__main__":
    mode, kubeconfig = sys.argv[1], sys.argv[2]
    found = floor(api_client(kubeconfig), sys.argv[3]) if mode == "floor" else naive(api_client(kubeconfig))
    print(f"{mode}: {found} items")
