"""The manifests on a real API server: accepted as they are, and their pods land on (simulated) nodes.

The image is not run: the simulated kubelet only reports the pod Running. Admission is real, including
Pod Security `restricted` on the rwo-failover namespace.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from rwo_testkit.control_plane import NODE_MONITOR_GRACE_SECONDS
from rwo_testkit.e2e import CLOUD_TAINT, REPO, record, wait_for

pytestmark = pytest.mark.e2e
LABEL = "app.kubernetes.io/name=rwo-failover"


@pytest.fixture(scope="module")
def applied(cluster):
    for name in ("d1", "d2"):
        cluster.sim.add_node(name)
    cluster.kubectl("apply", "-k", str(REPO))
    cluster.kubectl("apply", "-k", str(REPO / "deploy" / "ha"))
    return cluster


def pods(cluster, owner_kind: str) -> list[dict]:
    found = cluster.kube.items("/api/v1/namespaces/rwo-failover/pods", labelSelector=LABEL)
    return [p for p in found if any(r["kind"] == owner_kind for r in p["metadata"].get("ownerReferences") or ())]


def test_the_deployment_pod_passes_admission_and_lands_on_a_node(applied):
    pod = wait_for("a Deployment pod scheduled",
                   lambda: next((p for p in pods(applied, "ReplicaSet") if p["spec"].get("nodeName")), None), 60)
    assert pod["spec"]["nodeName"] in ("d1", "d2")
    assert "--once" not in pod["spec"]["containers"][0].get("args", [])
    assert pod["spec"]["priorityClassName"] == "rwo-failover"


def test_the_cronjob_creates_jobs_whose_pods_land_on_a_node(applied):
    pod = wait_for("a CronJob pod scheduled",
                   lambda: next((p for p in pods(applied, "Job") if p["spec"].get("nodeName")), None), 90, every=2)
    assert pod["spec"]["nodeName"] in ("d1", "d2")
    assert pod["spec"]["containers"][0]["args"] == ["--once"]
    assert pod["spec"]["serviceAccountName"] == "rwo-failover"


def test_a_cronjob_whose_job_pod_dies_with_its_node_resumes_on_a_live_node(applied):
    """Issue 12: with Forbid, a Job pod stuck Terminating on a dead node blocked every later run, for good.
    With Replace, the next scheduled run replaces that Job and its pod lands on a live node."""
    applied.sim.add_node("d3")
    first = wait_for("a CronJob pod running", lambda: next(
        (p for p in pods(applied, "Job") if applied.running("rwo-failover", p["metadata"]["name"])), None), 90,
        every=2)
    node, job = first["spec"]["nodeName"], first["metadata"]["ownerReferences"][0]["name"]
    off = time.monotonic()
    applied.sim.power_off(node)
    wait_for(f"{node} NotReady", lambda: applied.ready(node) != "True", NODE_MONITOR_GRACE_SECONDS + 20)
    applied.taint(node, CLOUD_TAINT)

    def resumed():
        return next((p for p in pods(applied, "Job") if p["spec"].get("nodeName") not in (None, node)
                     and p["metadata"]["ownerReferences"][0]["name"] != job
                     and p["metadata"]["creationTimestamp"] > first["metadata"]["creationTimestamp"]), None)
    new = wait_for("a new Job's pod on a live node", resumed, 2 * 60 + 30, every=2)
    took = time.monotonic() - off
    assert took <= 2 * 60 + NODE_MONITOR_GRACE_SECONDS + 10, "within two schedule periods of the outage"
    record(f"CronJob mode: a new pass's pod scheduled on a live node {took:.0f}s after the node running the "
           f"previous pass's pod powered off (schedule: every minute)")
    assert new["spec"]["nodeName"] != node


def test_the_standby_takes_the_lead_when_the_leaders_node_dies(applied, tmp_path):
    """Two continuous-mode replicas as deployed (their ServiceAccount, rbac.yaml and the leader-election Role).
    The leader's node powers off: its process dies at once, releasing nothing (SIGKILL)."""
    sa = applied.install_rbac()
    env = {**os.environ, "KUBECONFIG": str(sa), "HOME": str(applied.cp.workdir), "LOG_FORMAT": "json",
           "INTERVAL": "2", "LEADER_ELECTION": "true", "MIN_NOT_READY_SECONDS": "10", "METRICS_PORT": "0"}
    lease_path = "/apis/coordination.k8s.io/v1/namespaces/rwo-failover/leases/rwo-failover-leader"
    logs = [tmp_path / f"replica-{i}.log" for i in range(2)]
    replicas = [subprocess.Popen([sys.executable, str(REPO / "reconcile.py")], env=env, cwd=REPO,
                                 stdout=log.open("w"), stderr=subprocess.STDOUT) for log in logs]

    def leading(i: int) -> str:
        lines = [json.loads(line) for line in logs[i].read_text().splitlines() if line.startswith("{")]
        return next((line["identity"] for line in lines if line["message"] == "leader election: now leading"), "")
    try:
        first = wait_for("a leader", lambda: [i for i in range(2) if leading(i)], 30)[0]
        identity = leading(first)
        assert applied.kube.get(lease_path)["spec"]["holderIdentity"] == identity
        time.sleep(3)  # the standby has seen the leader's Lease, and watches it
        replicas[first].kill()
        replicas[first].wait()
        dead = time.monotonic()
        wait_for("the standby leading", lambda: leading(1 - first), 60, every=0.2)
        took = time.monotonic() - dead
        assert applied.kube.get(lease_path)["spec"]["holderIdentity"] == leading(1 - first) != identity
    finally:
        for proc in replicas:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=60)
    record(f"HA continuous mode: the standby became leader {took:.1f}s after the leader's process died "
           "(LEADER_ELECTION_LEASE_SECONDS=15)")
    assert took <= 15 + 5
