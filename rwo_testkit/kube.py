"""A small raw-JSON Kubernetes client for the e2e tier and its simulators (admin or any token).

It rides the official client's ApiClient (kubeconfig, TLS), as rwo_failover.kube.transport does, and returns dicts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


class KubeError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status


class Kube:
    def __init__(self, kubeconfig: Path) -> None:
        cfg = k8s.Configuration()
        k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg, persist_config=False)
        self.api = k8s.ApiClient(cfg)

    def call(self, method: str, path: str, body: Any = None, *, query: list | None = None,
             content_type: str = "application/json") -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        request = self.api.param_serialize(method=method, resource_path=path, query_params=query or [],
                                           header_params=headers, body=body, auth_settings=["BearerToken"])
        response = self.api.call_api(*request, _request_timeout=(10, 30))
        data = response.read()
        response.response.release_conn()
        if not 200 <= response.status <= 299:
            raise KubeError(response.status, data.decode("utf-8", "replace"))
        return json.loads(data) if data else {}

    def get(self, path: str) -> dict | None:
        try:
            return self.call("GET", path)
        except KubeError as err:
            if err.status == 404:
                return None
            raise

    def items(self, path: str, **query: str) -> list[dict]:
        return self.call("GET", path, query=list(query.items())).get("items") or []

    def create(self, path: str, body: dict) -> dict:
        return self.call("POST", path, body)

    def apply(self, path: str, body: dict) -> dict:
        """Create, or merge-patch when it exists."""
        try:
            return self.create(path, body)
        except KubeError as err:
            if err.status != 409:
                raise
            name = body["metadata"]["name"]
            return self.call("PATCH", f"{path}/{name}", body, content_type=MERGE)

    def patch(self, path: str, body: dict, content_type: str = MERGE) -> dict:
        return self.call("PATCH", path, body, content_type=content_type)

    def delete(self, path: str, body: dict | None = None) -> dict | None:
        try:
            return self.call("DELETE", path, body)
        except KubeError as err:
            if err.status == 404:
                return None
            raise
