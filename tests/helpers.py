"""Small helpers shared by the judgment and liveness tests: build an outage, read what a pass did."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

import pytest
from conftest import ROOT

from rwo_failover.model import OUT_OF_SERVICE_KEY, RECOVERY_LABEL
from rwo_testkit import fake_cluster as fc


def stuck(api, node: str, name: str = "db-0", *, namespace: str = "default", **pod_args) -> dict:
    fc.add_volume(api, f"data-{name}", namespace=namespace, attached_to=node)
    return api.add(fc.pod(name, node, namespace=namespace, claims=[f"data-{name}"], terminating=True, **pod_args))


def tainted_node(api, name: str, not_ready_for: float, *, lease_renewed_ago: float, duration=40) -> None:
    api.add(fc.node(name, ready="Unknown", since=not_ready_for, taints=[fc.SHUTDOWN, fc.UNREACHABLE]))
    api.add(fc.lease(name, lease_renewed_ago, duration))


def recovery_records(api) -> list[dict]:
    """Our records: ConfigMaps in RECOVERY_NAMESPACE (rwo-failover), where no tenant can write."""
    return [json.loads(c["data"]["record"]) for c in api.objects("configmaps")
            if c["metadata"]["namespace"] == "rwo-failover" and c["metadata"]["labels"] == {RECOVERY_LABEL: "pending"}]


def pod_names(api) -> set[str]:
    return {p["metadata"]["name"] for p in api.objects("pods")}


def deletes(api, resource: str) -> list:
    return [r for r in api.requests if r.verb == "delete" and r.resource == resource]


def patches(api) -> list:
    return [r for r in api.requests if r.verb == "patch" and r.resource == "nodes"]


def oos_taints(api, node: str) -> list[dict]:
    return [t for t in api.get("nodes", node)["spec"].get("taints") or () if t["key"] == OUT_OF_SERVICE_KEY]


def states(result) -> dict[str, str]:
    return {line["node"]: line["state"] for line in result.lines("node verdict")}


class Skewed:
    """One pass in-process whose own wall clock is off by `skew` seconds from the API server's."""

    def __init__(self, code: int, out: str) -> None:
        self.code = code
        self.logs = [json.loads(line) for line in out.splitlines() if line.strip()]

    def lines(self, message: str) -> list[dict]:
        return [line for line in self.logs if line.get("message") == message]


def real_tool(name: str, package: str) -> str:
    """A real program from Debian's packages; a skip with one line without it, a failure where CI requires it."""
    found = shutil.which(name)
    if not found:
        if os.environ.get("E2E_REQUIRED"):
            pytest.fail(f"{name} is required here: apt-get install {package}")
        pytest.skip(f"{name} is not installed: apt-get install {package}")
    return found


def skewed_pass(kubeconfig: str, skew: int, **env: str) -> Skewed:
    """One pass of the real reconcile.py, as a process whose own wall clock runs `skew` seconds off the API
    server's (Debian's faketime; its monotonic clock is left alone, as a skewed machine's would be)."""
    faketime = real_tool("faketime", "faketime")
    # ONCE_WAIT_SECONDS=0: one judgment, of the cluster as the test built it (tests/test_once_wait.py waits).
    full = {"PATH": os.environ.get("PATH", ""), "KUBECONFIG": kubeconfig, "LOG_FORMAT": "json",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1", "ONCE_WAIT_SECONDS": "0", **env}
    proc = subprocess.run([faketime, "-f", f"{skew:+d}s", sys.executable, str(ROOT / "reconcile.py"), "--once"],
                          env=full, cwd=ROOT, capture_output=True, text=True, timeout=120)
    return Skewed(proc.returncode, proc.stdout)


def detached(api) -> list[dict]:
    """The VolumeAttachments left once the CSI external-attacher has detached every one deleted so far. Its
    finalizer keeps a deleted attachment, marked, until then (as on kube-apiserver; the fixture too since issue 37),
    so "the pass deleted every attachment" is `detached(api) == []`: one it did not delete is never marked."""
    api.attacher.detach()
    return api.objects("volumeattachments")


def attached(api) -> list[dict]:
    """The VolumeAttachments nobody has deleted: a deleted one stays, marked, until its attacher has detached it."""
    return [va for va in api.objects("volumeattachments") if not va["metadata"].get("deletionTimestamp")]


def sixty_pods_freed(api, run_pass) -> tuple[Any, float]:
    """One pass over a dead node holding 60 stuck pods with attached RWO claims (fc.outage), none deferred by the
    pod cap: the pass's result, and how long it took in seconds."""
    fc.outage(api, pods=[f"db-{i}" for i in range(60)])
    started = time.monotonic()
    result = run_pass(MAX_PODS_PER_PASS="100")
    return result, time.monotonic() - started
