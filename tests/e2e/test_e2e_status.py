"""`kubectl rwo-failover status` on a real control plane, after a real outage (issue 38).

The chart is installed (CronJob mode, with the read-only status-viewer roles); a node running a StatefulSet pod
is powered off and tainted as a cloud does, and a real pass (the chart's ServiceAccount) frees the pod: our
out-of-service taint on the node, the claim's recovery pending. One of the CronJob's Jobs ends as a pass that
refused would (its pod's container exits 3, reported as the kubelet reports it), and the Job controller applies
the podFailurePolicy. An operator pauses. Then a human bound only to the status-viewer roles (get and list) runs
`kubectl rwo-failover status`, as text and as JSON, and each section says what happened.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rwo_failover.run.exitcodes import EXIT_OK, EXIT_REFUSED
from rwo_testkit.e2e import CLOUD_TAINT, OOS_KEY, REPO, wait_for

pytestmark = pytest.mark.e2e
chart = pytest.importorskip("rwo_testkit.chart")
NS = "rwo-failover"


def token(cluster, namespace: str, account: str) -> Path:
    answer = cluster.kube.create(f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
                                 {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                  "spec": {"expirationSeconds": 3600}})
    return cluster.cp.kubeconfig_for(answer["status"]["token"], account)


def viewer(cluster) -> Path:
    """A human's kubeconfig: a ServiceAccount bound to the status-viewer roles, and to nothing else."""
    cluster.kube.create(f"/api/v1/namespaces/{NS}/serviceaccounts",
                        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ops-viewer"}})
    subject = [{"kind": "ServiceAccount", "name": "ops-viewer", "namespace": NS}]
    cluster.kube.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "ops-viewer-status"}, "subjects": subject,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "rwo-failover-status-viewer"}})
    cluster.kube.create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "ops-viewer-status"}, "subjects": subject,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "rwo-failover-status-viewer"}})
    return token(cluster, NS, "ops-viewer")


def a_job_pod_exits(cluster, code: int) -> str:
    """The first of the CronJob's Job pods to run ends with `code`, as its kubelet would report the container's
    exit; the Job's name."""
    pod = wait_for("a Job's pod running", lambda: next(
        (p for p in cluster.kube.items(f"/api/v1/namespaces/{NS}/pods",
                                       labelSelector="app.kubernetes.io/name=rwo-failover")
         if (p.get("status") or {}).get("phase") == "Running"), None), 120, every=2)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    cluster.kube.patch(f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}/status", {"status": {
        "phase": "Failed", "containerStatuses": [{
            "name": "reconcile", "ready": False, "restartCount": 0, "image": "sim", "imageID": "sim",
            "state": {"terminated": {"exitCode": code, "reason": "Error", "startedAt": stamp, "finishedAt": stamp}}}]}})
    return pod["metadata"]["labels"]["job-name"]


def test_status_after_a_real_outage_says_each_thing_and_only_reads(cluster, tmp_path):
    for name in ("s-live-a", "s-live-b", "s-victim"):
        cluster.sim.add_node(name)
    manifest = tmp_path / "release.yaml"
    manifest.write_text(chart.render_text({"mode": "cronjob", "namespace": {"create": True},
                                           "statusViewer": {"create": True}}, name=NS, namespace=NS))
    cluster.kubectl("apply", "-f", str(manifest))
    job = a_job_pod_exits(cluster, EXIT_REFUSED)
    failed = wait_for("the Job failed by its podFailurePolicy", lambda: next(
        (c for c in (cluster.kube.get(f"/apis/batch/v1/namespaces/{NS}/jobs/{job}") or {}).get("status", {})
         .get("conditions") or () if c["type"] == "Failed" and c["status"] == "True"), None), 60)
    assert failed["reason"] == "PodFailurePolicy", failed

    cluster.statefulset("status-app", "db", node_affinity="s-victim")
    wait_for("db-0 running", lambda: cluster.running("status-app", "db-0"), 120)  # CI runs both tiers at once
    wait_for("its volume attached", lambda: cluster.attached("pv-status-app-db", "s-victim"), 30)
    # Nowhere for the replacement to go: the claim's recovery stays pending through both of status' reads below.
    for name in ("s-live-a", "s-live-b"):
        cluster.kube.patch(f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True}})
    cluster.sim.power_off("s-victim")
    wait_for("s-victim NotReady", lambda: cluster.ready("s-victim") != "True", 90)
    cluster.taint("s-victim", CLOUD_TAINT)
    reconciler = token(cluster, NS, NS)
    passes = []

    def a_pass():
        # A run's first pass finds the node "not yet" down: a new process must see it NotReady itself first (issue
        # 35). The run waits that out and passes again, so any pass of the run may be the one that frees db-0.
        passes.append(cluster.run_pass(reconciler, ONCE_WAIT_SECONDS="0"))
        finished = [line for line in passes[-1].logs if line.get("message") == "pass finished"]
        freeing = any(line.get("pods_deleted") or line.get("pods_already_gone") for line in finished)
        return passes[-1] if freeing else None
    try:
        freed = wait_for("a pass that frees db-0", a_pass, 90, every=2)
    except AssertionError:
        raise AssertionError([(p.code, p.summary, p.stderr[-300:]) for p in passes[-2:]]) from None
    assert freed.code == EXIT_OK and [t for t in cluster.taints("s-victim") if t["key"] == OOS_KEY]
    cluster.kube.create(f"/api/v1/namespaces/{NS}/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rwo-failover-control"},
        "data": {"paused": "true", "pausedBy": "alice (INC-9)", "reason": "storage maintenance"}})

    human = viewer(cluster)
    env = {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}", "HOME": str(cluster.cp.workdir),
           "KUBECONFIG": str(human)}
    as_json = subprocess.run([sys.executable, str(REPO / "reconcile.py"), "status", "-o", "json"], env=env,
                             cwd=REPO, capture_output=True, text=True, timeout=120)
    assert as_json.returncode == EXIT_OK, as_json.stderr
    found = json.loads(as_json.stdout)
    assert found["install"]["kind"] == "CronJob" and found["settings"].startswith("the settings of CronJob")
    assert found["pause"]["paused"] and found["pause"]["by"] == "alice (INC-9)" and found["pause"]["since"]
    assert found["storm"]["state"] == "none"
    assert {"node": "s-victim", "verdict": "down"}.items() <= next(
        n for n in found["nodes"] if n["node"] == "s-victim").items()
    assert [(h["kind"], h["node"]) for h in found["held"]] == [("out-of-service taint", "s-victim")]
    [pending] = found["recoveries"]
    assert pending["claim"] == "status-app/data-db-0" and pending["node"] == "s-victim"
    assert pending["age_seconds"] >= 0
    jobs = {j["job"]: j for j in found["passes"]["jobs"]}
    assert jobs[job]["outcome"] == "failed" and jobs[job]["reason"] == "PodFailurePolicy"
    assert jobs[job]["exit_codes"] == [EXIT_REFUSED]
    assert not [u for u in found["unreadable"] if "forbidden" in u.lower()], found["unreadable"]

    plugin = subprocess.run(["kubectl", "rwo-failover", "status"], env=env, capture_output=True, text=True,
                            timeout=120)
    assert plugin.returncode == EXIT_OK, plugin.stderr
    text = plugin.stdout
    for section in ("CONTROLS", "NODES AND WHAT A PASS WOULD DO NOW", "HELD BY US (1)", "RECOVERIES PENDING (1)",
                    "LAST PASSES"):
        assert section in text, section
    assert "PAUSED by alice (INC-9)" in text and "s-victim" in text and "status-app/data-db-0" in text
    assert f"{job}" in text and "failed (PodFailurePolicy)" in text

    # Read-only, as the API server judges it: the human's token may not write at all.
    denied = subprocess.run(["kubectl", "--kubeconfig", str(human), "auth", "can-i", "patch", "nodes"],
                            capture_output=True, text=True, timeout=60)
    assert denied.stdout.strip() == "no"
    cluster.sim.remove_node("s-victim")
