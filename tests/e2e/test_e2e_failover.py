"""The seed outage on a real control plane, both paths, and the safety scenarios around it.

Real kube-apiserver, controller-manager (attach-detach, node lifecycle, PodGC, StatefulSet...) and scheduler;
the kubelets and the CSI attacher are simulated (rwo_testkit/node_sim.py). Every assertion reads the real
API state. The reconciler runs as deployed: its ServiceAccount token, through rbac.yaml.
"""

from __future__ import annotations

import time

import pytest

from rwo_failover.run.exitcodes import EXIT_OK, EXIT_REFUSED
from rwo_testkit.control_plane import NODE_MONITOR_GRACE_SECONDS
from rwo_testkit.e2e import CLOUD_TAINT, LEASE_SECONDS, OOS_KEY, PASS_ENV, outage, record, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def sa(cluster):
    """The reconciler's kubeconfig: rbac.yaml applied, a TokenRequest token for its ServiceAccount."""
    for name in ("live-a", "live-b"):
        cluster.sim.add_node(name)
    return cluster.install_rbac()


@pytest.mark.parametrize("path, env", [("direct", {"OUT_OF_SERVICE_TAINT": "never"}),
                                       ("out-of-service", {"OUT_OF_SERVICE_TAINT": "auto"})])
def test_the_seed_outage_fails_over_and_a_normal_outage_is_never_split_brain(cluster, sa, path, env):
    node = f"victim-{path}"
    cluster.sim.add_node(node)
    cluster.statefulset(f"seed-{path}", "db", node_affinity=node)

    codes: list[int] = []
    timing = outage(cluster, f"seed-{path}", "db", node=node,
                    act=lambda: codes.append(cluster.run_pass(sa, **env).code))

    assert timing is not None, f"no replacement; pass exit codes {codes}"
    assert set(codes) == {EXIT_OK}, f"a normal outage never exits 3: {codes}"
    assert timing.to in ("live-a", "live-b")
    has_ours = any(t["key"] == OOS_KEY for t in cluster.taints(node))
    assert has_ours == (path == "out-of-service")
    record(f"seed outage, {path} path: replacement Running+Ready with its volume attached "
           f"{timing.from_taint:.0f}s after the shutdown taint, {timing.from_power_off:.0f}s after power-off "
           f"(node-monitor grace {NODE_MONITOR_GRACE_SECONDS}s, lease {LEASE_SECONDS}s, "
           f"MIN_NOT_READY_SECONDS={PASS_ENV['MIN_NOT_READY_SECONDS']})")
    recovered = confirmed_recovery(cluster, sa, f"seed-{path}", env)
    record(f"seed outage, {path} path: RWOVolumeRecovered says: {recovered['message']}")
    if path == "out-of-service":
        undo(cluster, sa, node)
    else:
        cluster.sim.remove_node(node)


def confirmed_recovery(cluster, sa, namespace: str, env: dict) -> dict:
    """The next passes confirm the replacement: one RWOVolumeRecovered Event on the claim, and its recovery
    record (a ConfigMap in rwo-failover, under the reconciler's own RBAC) deleted."""
    def event():
        assert cluster.run_pass(sa, **env).code == EXIT_OK
        found = [e for e in cluster.kube.items(f"/api/v1/namespaces/{namespace}/events")
                 if e["reason"] == "RWOVolumeRecovered"]
        return found[0] if found else None
    found = wait_for("RWOVolumeRecovered on the claim", event, 60, every=2)
    claim = cluster.kube.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/data-db-0")
    assert found["involvedObject"] == {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "data-db-0",
                                       "namespace": namespace, "uid": claim["metadata"]["uid"]}
    assert "rwo-failover.io/recovery" not in (claim["metadata"].get("labels") or {}), "claims are never written"
    records = cluster.kube.items("/api/v1/namespaces/rwo-failover/configmaps",
                                 labelSelector="rwo-failover.io/recovery")
    assert not [r for r in records if claim["metadata"]["uid"] in r["metadata"]["name"]], "the record is settled"
    return found


def undo(cluster, sa, node: str) -> None:
    """The node comes back: our taint comes off after RECOVERY_SECONDS, and not before."""
    cluster.sim.power_on(node)
    cluster.untaint(node, CLOUD_TAINT["key"])  # the cloud: the instance runs again
    back = time.monotonic()
    wait_for(f"{node} Ready", lambda: cluster.ready(node) == "True", 30)
    early = cluster.run_pass(sa, RECOVERY_SECONDS="20")
    assert early.code == EXIT_OK and early.summary["recovering"] == 1
    assert any(t["key"] == OOS_KEY for t in cluster.taints(node)), "not before RECOVERY_SECONDS"
    time.sleep(max(0.0, back + 22 - time.monotonic()))
    late = cluster.run_pass(sa, RECOVERY_SECONDS="20")
    assert late.code == EXIT_OK and late.summary["taints_removed"] == 1, late.logs
    assert not any(t["key"] == OOS_KEY for t in cluster.taints(node))
    assert "rwo-failover.io/out-of-service-added-at" not in cluster.node(node)["metadata"].get("annotations", {})
    cluster.sim.remove_node(node)


def test_a_heartbeating_node_with_a_shutdown_taint_is_split_brain(cluster, sa):
    cluster.sim.add_node("sb-node")
    cluster.statefulset("split", "db", node_affinity="sb-node")
    pod = wait_for("split/db-0 running", lambda: cluster.running("split", "db-0"), 60)
    assert pod["spec"]["nodeName"] == "sb-node"
    cluster.taint("sb-node", CLOUD_TAINT)

    result = cluster.run_pass(sa)

    assert result.code == EXIT_REFUSED and result.summary["split_brain"] == 1
    assert cluster.pod("split", "db-0")["metadata"]["uid"] == pod["metadata"]["uid"]
    assert cluster.attached("pv-split-db", "sb-node")
    assert not any(t["key"] == OOS_KEY for t in cluster.taints("sb-node"))
    events = cluster.kube.items("/api/v1/namespaces/default/events", fieldSelector="involvedObject.name=sb-node")
    assert any(e["reason"] == "ShutdownTaintOnLiveNode" and e["type"] == "Warning" for e in events)
    cluster.sim.remove_node("sb-node")


def test_a_protected_pod_is_deleted_by_nothing_not_even_through_our_taint(cluster, sa):
    """EXCLUDE_NAMESPACES protects vault/keep-0: no out-of-service taint (Kubernetes would delete it), and
    the unprotected pod on the same dead node is still freed, directly."""
    cluster.sim.add_node("p-node")
    cluster.statefulset("app", "db", node_affinity="p-node")
    cluster.statefulset("vault", "keep", node_affinity="p-node")
    keep = wait_for("vault/keep-0 running", lambda: cluster.running("vault", "keep-0"), 60)
    db = wait_for("app/db-0 running", lambda: cluster.running("app", "db-0"), 60)
    assert keep["spec"]["nodeName"] == db["spec"]["nodeName"] == "p-node"
    cluster.sim.power_off("p-node")
    wait_for("p-node NotReady", lambda: cluster.ready("p-node") != "True", NODE_MONITOR_GRACE_SECONDS + 20)
    cluster.taint("p-node", CLOUD_TAINT)
    env = {"EXCLUDE_NAMESPACES": "kube-system,vault"}

    def db_freed():
        result = cluster.run_pass(sa, **env)
        assert result.code == EXIT_OK, result.logs
        pod = cluster.pod("app", "db-0")
        return pod is None or pod["metadata"]["uid"] != db["metadata"]["uid"]
    wait_for("app/db-0 force-deleted", db_freed, 90, every=2)
    time.sleep(25)  # longer than PodGC's 20 s cycle, which would act on an out-of-service taint

    assert not any(t["key"] == OOS_KEY for t in cluster.taints("p-node"))
    still = cluster.pod("vault", "keep-0")
    assert still and still["metadata"]["uid"] == keep["metadata"]["uid"]
    assert not still["metadata"].get("deletionTimestamp")
    cluster.sim.remove_node("p-node")


def test_start_up_names_a_recovery_namespace_that_does_not_exist(cluster, sa):
    """The real API server answers a create in a namespace that was never created with 404 (the fixture's
    missing_namespaces copies it): start-up says once that recovery confirmation is off. Run as an admin would
    by hand (our ServiceAccount's Role would get 403 there first), as a dry run: nothing is written."""
    off = "off: what the settings need does not exist"
    missing = cluster.run_pass(cluster.kubeconfig, RECOVERY_NAMESPACE="never-created", DRY_RUN="true")
    [line] = [line for line in missing.logs if line["message"] == off]
    assert line["setting"] == "RECOVERY_NAMESPACE=never-created" and "404" in line["error"]
    assert 'namespaces "never-created" not found' in line["error"]
    there = cluster.run_pass(sa, DRY_RUN="true")
    assert there.code == EXIT_OK and not [line for line in there.logs if line["message"] == off]


def test_a_deployments_replacement_is_confirmed_through_its_volumes_attachment(cluster, sa):
    """A Deployment's replacement has another name: recovery confirmation finds it on the node its volume is
    attached to (pods listed there by spec.nodeName), not by listing the namespace every pass. On the real
    controllers: the ReplicaSet makes the replacement, the attach-detach controller its VolumeAttachment."""
    node, namespace = "victim-deploy", "deploy"
    cluster.sim.add_node(node)
    cluster.deployment(namespace, "web", node_affinity=node)
    old = wait_for("the deployment's pod running", lambda: cluster.running_app(namespace, "web"), 90)
    assert old["spec"]["nodeName"] == node
    wait_for("its volume attached", lambda: cluster.attached(f"pv-{namespace}-web", node), 30)
    cluster.sim.power_off(node)
    wait_for(f"{node} NotReady", lambda: cluster.ready(node) != "True", NODE_MONITOR_GRACE_SECONDS + 30)
    cluster.taint(node, CLOUD_TAINT)

    def replaced():
        assert cluster.run_pass(sa).code == EXIT_OK
        pod = cluster.running_app(namespace, "web", not_on=node)
        return pod if pod and cluster.attached(f"pv-{namespace}-web", pod["spec"]["nodeName"]) else None
    new = wait_for("the replacement Running with its volume attached", replaced, 120, every=2)
    assert new["metadata"]["name"] != old["metadata"]["name"]

    def confirmed():
        assert cluster.run_pass(sa).code == EXIT_OK
        return [e for e in cluster.kube.items(f"/api/v1/namespaces/{namespace}/events")
                if e["reason"] == "RWOVolumeRecovered"]
    [event] = wait_for("RWOVolumeRecovered on the claim", confirmed, 60, every=2)
    assert event["involvedObject"]["name"] == "data-web"
    assert new["metadata"]["name"] in event["message"], event["message"]
    cluster.sim.remove_node(node)
