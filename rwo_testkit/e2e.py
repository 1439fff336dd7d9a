"""The e2e tier's pytest plugin: a real control plane per test module, and helpers to drive an outage.

The reconciler runs as it is deployed: `rbac.yaml` is applied with kubectl, a token for its ServiceAccount
comes from the TokenRequest API, and `reconcile.py --once` runs as a subprocess with a kubeconfig for that
token, so RBAC judges every call. Measured figures are printed at the end of the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from . import log_sink
from .control_plane import AssetsMissing, ControlPlane, find_assets
from .kube import Kube
from .node_sim import STORAGE_CLASS, NodeSimulator

REPO = Path(__file__).resolve().parent.parent
CLOUD_TAINT = {"key": "node.cloudprovider.kubernetes.io/shutdown", "effect": "NoSchedule"}
OOS_KEY = "node.kubernetes.io/out-of-service"
# Faster than the defaults so the tier stays short; the kubelet's lease duration is a kubelet flag, and
# MIN_NOT_READY_SECONDS a setting. docs/failover.md says what the defaults would give.
LEASE_SECONDS = 10
PASS_ENV = {"MIN_NOT_READY_SECONDS": "10", "LOG_FORMAT": "json"}
FIGURES: list[str] = []
NOT_RUN: list[str] = []  # why the e2e tier did not run: one line at the end of the run
T = TypeVar("T")


@dataclass
class PassResult:
    code: int
    logs: list[dict]
    stderr: str

    @property
    def summary(self) -> dict:
        return next(line for line in self.logs if line.get("message") == "pass finished")


def wait_for(what: str, check: Callable[[], T | None], timeout: float, *, every: float = 0.5) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


class Cluster:
    def __init__(self, cp: ControlPlane, sim: NodeSimulator) -> None:
        self.cp, self.sim, self.kube = cp, sim, Kube(cp.kubeconfig)
        self.kubeconfig = cp.kubeconfig

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["kubectl", "--kubeconfig", str(self.kubeconfig), *args], capture_output=True,
                              text=True, check=check, timeout=120)

    def install_rbac(self) -> Path:
        """kubectl apply -f rbac.yaml, then a kubeconfig with a TokenRequest token of its ServiceAccount."""
        self.kubectl("apply", "-f", str(REPO / "rbac.yaml"))
        answer = self.kube.create("/api/v1/namespaces/rwo-failover/serviceaccounts/rwo-failover/token",
                                  {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                   "spec": {"expirationSeconds": 7200}})
        return self.cp.kubeconfig_for(log_sink.plant(answer["status"]["token"]), "rwo-failover")

    def run_pass(self, kubeconfig: Path, **env: str) -> PassResult:
        full = {"PATH": os.environ.get("PATH", ""), "HOME": str(self.cp.workdir), "KUBECONFIG": str(kubeconfig),
                **PASS_ENV, **env}
        proc = subprocess.run([sys.executable, str(REPO / "reconcile.py"), "--once"], env=full, cwd=REPO,
                              capture_output=True, text=True, timeout=120)
        log_sink.SESSION.add(proc.stdout + proc.stderr)
        logs = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        return PassResult(proc.returncode, logs, proc.stderr)

    def namespace(self, name: str) -> None:
        self.kube.apply("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def _pod_spec(self, name: str, node_affinity: str | None, evict_after: int | None) -> dict:
        spec: dict = {"containers": [{"name": name, "image": "sim"}], "terminationGracePeriodSeconds": 30}
        if node_affinity:
            # A new node carries not-ready:NoSchedule until the node controller has seen it Ready.
            wait_for(f"{node_affinity} schedulable", lambda: not any(
                t["effect"] == "NoSchedule" for t in self.taints(node_affinity)), 30)
            spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 100, "preference": {"matchExpressions": [{
                    "key": "kubernetes.io/hostname", "operator": "In", "values": [node_affinity]}]}}]}}
        if evict_after is not None:  # taint eviction after this many seconds instead of the default 300
            spec["tolerations"] = [{"key": f"node.kubernetes.io/{key}", "operator": "Exists", "effect": "NoExecute",
                                    "tolerationSeconds": evict_after} for key in ("not-ready", "unreachable")]
        return spec

    def statefulset(self, namespace: str, name: str, node_affinity: str | None = None, *,
                    evict_after: int | None = None) -> None:
        """A one-replica StatefulSet with an RWO claim `data-<name>-0`, bound to a pre-made CSI PV."""
        self.namespace(namespace)
        self.sim.add_volume(f"pv-{namespace}-{name}", namespace, f"data-{name}-0")
        spec = self._pod_spec(name, node_affinity, evict_after)
        self.kube.create(f"/apis/apps/v1/namespaces/{namespace}/statefulsets", {
            "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": {"serviceName": name, "replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                         "accessModes": ["ReadWriteOnce"], "storageClassName": STORAGE_CLASS,
                         "resources": {"requests": {"storage": "1Gi"}}}}]}})

    def deployment(self, namespace: str, name: str, node_affinity: str | None = None, *,
                   evict_after: int | None = None) -> None:
        """A one-replica Deployment (strategy Recreate) mounting the RWO claim `data-<name>`, bound to a pre-made
        CSI PV. Its replacement is a new pod, with another name."""
        self.namespace(namespace)
        self.sim.add_volume(f"pv-{namespace}-{name}", namespace, f"data-{name}")
        self.kube.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": f"data-{name}"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": STORAGE_CLASS,
                     "volumeName": f"pv-{namespace}-{name}", "resources": {"requests": {"storage": "1Gi"}}}})
        spec = self._pod_spec(name, node_affinity, evict_after)
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{name}"}}]
        self.kube.create(f"/apis/apps/v1/namespaces/{namespace}/deployments", {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}})

    def pods_of(self, namespace: str, app: str) -> list[dict]:
        return self.kube.items(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"app={app}")

    def running_app(self, namespace: str, app: str, not_on: str = "") -> dict | None:
        """A pod of the app, Running and Ready, not being deleted, and not on `not_on`."""
        for pod in self.pods_of(namespace, app):
            found = self.running(namespace, pod["metadata"]["name"], not_on=not_on)
            if found:
                return found
        return None

    def pod(self, namespace: str, name: str) -> dict | None:
        return self.kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}")

    def running(self, namespace: str, name: str, not_on: str = "", *, not_uid: str = "") -> dict | None:
        """The pod, once Running and Ready (on another node and with another UID, when asked)."""
        pod = self.pod(namespace, name)
        if not pod or pod["metadata"].get("deletionTimestamp") or pod["metadata"]["uid"] == not_uid:
            return None
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or ())
        return pod if ready and pod["spec"].get("nodeName") not in ("", not_on) else None

    def attached(self, pv: str, node: str) -> dict | None:
        for va in self.kube.items("/apis/storage.k8s.io/v1/volumeattachments"):
            if va["spec"]["source"].get("persistentVolumeName") == pv and va["spec"]["nodeName"] == node \
                    and (va.get("status") or {}).get("attached"):
                return va
        return None

    def node(self, name: str) -> dict:
        return self.kube.get(f"/api/v1/nodes/{name}") or {}

    def ready(self, name: str) -> str:
        return next((c["status"] for c in self.node(name)["status"].get("conditions") or () if c["type"] == "Ready"),
                    "")

    def taint(self, name: str, taint: dict) -> None:
        """Add a taint by preconditioned read-modify-write, as a cloud controller would."""
        for _ in range(10):
            node = self.node(name)
            taints = node["spec"].get("taints") or []
            if any(t["key"] == taint["key"] for t in taints):
                return
            try:
                self.kube.patch(f"/api/v1/nodes/{name}", {"metadata": {
                    "resourceVersion": node["metadata"]["resourceVersion"]}, "spec": {"taints": taints + [taint]}})
                return
            except Exception:
                time.sleep(0.2)

    def untaint(self, name: str, key: str) -> None:
        for _ in range(10):
            node = self.node(name)
            kept = [t for t in node["spec"].get("taints") or () if t["key"] != key]
            try:
                self.kube.patch(f"/api/v1/nodes/{name}", {"metadata": {
                    "resourceVersion": node["metadata"]["resourceVersion"]}, "spec": {"taints": kept}})
                return
            except Exception:
                time.sleep(0.2)

    def taints(self, name: str) -> list[dict]:
        return self.node(name)["spec"].get("taints") or []


@dataclass
class Timing:
    from_taint: float
    from_power_off: float
    to: str


def outage(cluster: Cluster, namespace: str, name: str, *, node: str, act: Callable[[], None],
           timeout: float = 240) -> Timing | None:
    """Power `node` off; once it is NotReady, add the cloud's shutdown taint, as a cloud provider does for a
    stopped instance; then call `act` every 2 s (a pass, say) until the StatefulSet's replacement is Running
    and Ready on another node with its volume attached there. None when that did not happen in `timeout`."""
    old = wait_for(f"{namespace}/{name}-0 running", lambda: cluster.running(namespace, f"{name}-0"), 60)
    if old["spec"]["nodeName"] != node:
        raise AssertionError(f"{namespace}/{name}-0 runs on {old['spec']['nodeName']}, not {node}")
    pv = f"pv-{namespace}-{name}"
    wait_for("the volume attached", lambda: cluster.attached(pv, node), 30)
    off = time.monotonic()
    cluster.sim.power_off(node)
    tainted_at: float | None = None
    while time.monotonic() < off + timeout:
        if tainted_at is None and cluster.ready(node) != "True":
            cluster.taint(node, CLOUD_TAINT)
            tainted_at = time.monotonic()
        if tainted_at is not None:
            act()
        new = cluster.running(namespace, f"{name}-0", not_on=node, not_uid=old["metadata"]["uid"])
        if new and cluster.attached(pv, new["spec"]["nodeName"]):
            done = time.monotonic()
            assert tainted_at is not None
            return Timing(done - tainted_at, done - off, new["spec"]["nodeName"])
        time.sleep(2)
    return None


def record(figure: str) -> None:
    FIGURES.append(figure)


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """One real control plane per test module, with simulated nodes; tests isolate by namespace and node. A
    module's CONTROLLER_MANAGER_ARGS are kube-controller-manager's extra flags."""
    try:
        assets = find_assets(REPO)
    except AssetsMissing as err:
        if os.environ.get("E2E_REQUIRED"):  # CI sets it: there, a missing binary is a failure, not a skip
            pytest.fail(f"e2e tier required but cannot run: {err}")
        pytest.skip(f"e2e tier skipped: {err}")
    extra = tuple(getattr(request.module, "CONTROLLER_MANAGER_ARGS", ()))
    with tempfile.TemporaryDirectory(prefix="rwo-e2e-") as tmp, \
            ControlPlane(assets, Path(tmp), controller_manager_args=extra) as cp, \
            NodeSimulator(cp.kubeconfig, lease_seconds=LEASE_SECONDS) as sim:
        yield Cluster(cp, sim)


def pytest_collection_modifyitems(config, items: list) -> None:
    """Without its binaries the e2e tier is left out with one line saying what is missing, instead of a skip
    line per test; CI sets E2E_REQUIRED=1, and then the `cluster` fixture fails each test instead."""
    e2e = [item for item in items if item.get_closest_marker("e2e")]
    if not e2e or os.environ.get("E2E_REQUIRED"):
        return
    try:
        find_assets(REPO)
    except AssetsMissing as err:
        config.hook.pytest_deselected(items=e2e)
        items[:] = [item for item in items if not item.get_closest_marker("e2e")]
        NOT_RUN.append(f"e2e tier skipped ({len(e2e)} tests, E2E_REQUIRED=1 makes this a failure): {err}")


def pytest_sessionfinish(session, exitstatus: int) -> None:
    """`make e2e` without the binaries: the one line says why, and the run is a skip (0), not "no tests" (5)."""
    if NOT_RUN and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK


def pytest_terminal_summary(terminalreporter) -> None:
    for line in NOT_RUN:
        terminalreporter.write_line(line, yellow=True)
    if FIGURES:
        terminalreporter.section("e2e figures (real control plane)")
        for line in FIGURES:
            terminalreporter.write_line(line)
