"""The manifests on a real API server: accepted as they are, and their pods land on (simulated) nodes.

The image is not run: the simulated kubelet only reports the pod Running. Admission is real, including
Pod Security `restricted` on the rwo-failover namespace.
"""

from __future__ import annotations

import pytest

from rwo_testkit.e2e import REPO, wait_for

pytestmark = pytest.mark.e2e
LABEL = "app.kubernetes.io/name=rwo-failover"


@pytest.fixture(scope="module")
def applied(cluster):
    for name in ("d1", "d2"):
        cluster.sim.add_node(name)
    cluster.kubectl("apply", "-f", str(REPO / "rbac.yaml"), "-f", str(REPO / "cronjob.yaml"))
    cluster.kubectl("apply", "-f", str(REPO / "deployment.yaml"))
    return cluster


def pods(cluster, owner_kind: str) -> list[dict]:
    found = cluster.kube.items("/api/v1/namespaces/rwo-failover/pods", labelSelector=LABEL)
    return [p for p in found if any(r["kind"] == owner_kind for r in p["metadata"].get("ownerReferences") or ())]


def test_the_deployment_pod_passes_admission_and_lands_on_a_node(applied):
    pod = wait_for("a Deployment pod scheduled",
                   lambda: next((p for p in pods(applied, "ReplicaSet") if p["spec"].get("nodeName")), None), 60)
    assert pod["spec"]["nodeName"] in ("d1", "d2")
    assert "--once" not in pod["spec"]["containers"][0].get("args", []) and pod["spec"]["priorityClassName"] == "rwo-failover"


def test_the_cronjob_creates_jobs_whose_pods_land_on_a_node(applied):
    pod = wait_for("a CronJob pod scheduled",
                   lambda: next((p for p in pods(applied, "Job") if p["spec"].get("nodeName")), None), 90, every=2)
    assert pod["spec"]["nodeName"] in ("d1", "d2")
    assert pod["spec"]["containers"][0]["args"] == ["--once"]
    assert pod["spec"]["serviceAccountName"] == "rwo-failover"
