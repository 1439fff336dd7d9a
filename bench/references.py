#!/usr/bin/env python3
"""The benchmark's two reference programs, each run as its own process (so its RSS is its own).

    references.py floor KUBECONFIG  - page through the node list and json.loads it: nothing else. Any pass
                                      must at least do this, so it is the floor our pass is measured against.
                                      It uses the same lean transport as the pass (ApiClient.param_serialize
                                      and call_api), so the ratio measures our work, not the transport.
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


def floor(api: client.ApiClient) -> int:
    count, token = 0, None
    while True:
        query = [("limit", PAGE), ("continue", token) if token else ("resourceVersion", "0")]
        request = api.param_serialize(method="GET", resource_path="/api/v1/nodes", query_params=query,
                                      header_params={"Accept": "application/json"}, auth_settings=["BearerToken"])
        page = json.loads(api.call_api(*request).read())
        count += len(page["items"])
        token = page["metadata"].get("continue")
        if not token:
            return count


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
    print(f"{mode}: {(floor if mode == 'floor' else naive)(api_client(kubeconfig))} items")
