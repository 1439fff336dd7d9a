"""Every refusal path, end to end over HTTP: each asserts that nothing was deleted."""

from __future__ import annotations

import pytest
from helpers import attached, detached, oos_taints

from rwo_failover.planner import NodePlan, NodeState, NodeVerdict, PodAction
from rwo_failover.planner.caps import cap_pods
from rwo_failover.run.exitcodes import EXIT_OK, EXIT_REFUSED
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import Response


def deletes(api) -> list:
    return [r for r in api.requests if r.verb == "delete"]


def stuck_workload(api, node: str, claim: str = "data-db-0", pod: str = "db-0", namespace: str = "default",
                   pod_annotations=None, claim_annotations=None) -> dict:
    fc.add_volume(api, claim, namespace=namespace, attached_to=node, annotations=claim_annotations)
    return api.add(fc.pod(pod, node, namespace=namespace, claims=[claim], terminating=True,
                          annotations=pod_annotations))


@pytest.fixture
def cluster(api):
    for i in range(4):
        fc.live_node(api, f"worker-{i}")
    return api


def test_tainted_but_ready_node_is_refused_with_a_warning_event(cluster, run_pass):
    alive = fc.live_node(cluster, "alive", taints=[fc.SHUTDOWN])
    stuck_workload(cluster, "alive")

    result = run_pass()

    assert result.code == EXIT_REFUSED
    assert deletes(cluster) == [] and len(cluster.objects("pods")) == 1
    [event] = cluster.objects("events")
    assert event["type"] == "Warning" and event["involvedObject"] == {"apiVersion": "v1", "kind": "Node",
                                                                      "name": "alive",
                                                                      "uid": alive["metadata"]["uid"]}
    assert "tainted for shutdown but still heartbeating" in event["message"]
    assert result.summary["split_brain"] == 1


def test_tainted_not_ready_node_with_fresh_lease_is_split_brain(cluster, run_pass):
    cluster.add(fc.node("flapping", ready="False", since=600, taints=[fc.SHUTDOWN]))
    cluster.add(fc.lease("flapping", renewed_ago=5))
    stuck_workload(cluster, "flapping")

    result = run_pass()

    assert result.code == EXIT_REFUSED
    assert deletes(cluster) == []
    assert "Lease renewed" in cluster.objects("events")[0]["message"]


def test_recently_not_ready_node_is_not_yet_and_exits_zero(cluster, run_pass):
    fc.dead_node(cluster, "just-died", down_for=2)  # NotReady 2 s: under MIN_NOT_READY_SECONDS (3)
    stuck_workload(cluster, "just-died")

    result = run_pass()

    assert result.code == EXIT_OK
    assert cluster.mutations() == []
    assert result.summary["not_yet"] == 1
    assert not [r for r in result.requests if r.resource == "pods"], "pods of an unproven node are not even read"


def test_missing_lease_counts_as_stale_only_when_not_ready(cluster, run_pass):
    cluster.add(fc.node("no-lease", ready="Unknown", since=600, taints=[fc.SHUTDOWN]))
    stuck_workload(cluster, "no-lease")
    assert run_pass().code == EXIT_OK
    assert [r.resource for r in deletes(cluster)] == ["pods", "volumeattachments"]


def test_untainted_dead_node_is_not_a_candidate(cluster, run_pass):
    cluster.add(fc.node("dead-untainted", ready="Unknown", since=3600, taints=[fc.UNREACHABLE]))
    cluster.add(fc.lease("dead-untainted", 3600))
    stuck_workload(cluster, "dead-untainted")

    result = run_pass()

    assert result.code == EXIT_OK and cluster.mutations() == []
    assert result.summary["tainted"] == 0


@pytest.mark.parametrize("env, dead_nodes, pods_each", [
    ({"MAX_UNHEALTHY_FRACTION": "0.2"}, 2, 1),   # 2 of 6 not Ready
    ({"MAX_NODES_PER_PASS": "1"}, 2, 1),
])
def test_brake_acts_on_nothing_and_exits_3(cluster, run_pass, env, dead_nodes, pods_each):
    for n in range(dead_nodes):
        fc.dead_node(cluster, f"dead-{n}")
        for p in range(pods_each):
            stuck_workload(cluster, f"dead-{n}", claim=f"data-{n}-{p}", pod=f"db{n}-{p}")

    result = run_pass(**env)

    assert result.code == EXIT_REFUSED
    assert deletes(cluster) == []
    assert result.summary["refusal"].startswith("brake:")
    events = cluster.objects("events")
    assert events and all(e["reason"] == "FailoverRefused" and e["type"] == "Warning" for e in events)


def test_pod_replaced_between_observe_and_act_is_left_alone(cluster, run_pass):
    fc.dead_node(cluster, "dead")
    old = stuck_workload(cluster, "dead")
    replaced = {}

    def replace_on_recheck(req):
        # The StatefulSet controller re-creates db-0 (new UID) just before we act.
        if req.verb == "get" and req.resource == "nodes" and not replaced:
            fresh = fc.pod("db-0", "worker-1", claims=["data-db-0"], phase="Pending")
            replaced["uid"] = cluster.replace(fresh)["metadata"]["uid"]
        return None
    cluster.hooks.append(replace_on_recheck)

    result = run_pass()

    [attempt] = deletes(cluster)
    assert attempt.status == 409 and attempt.body["preconditions"]["uid"] == old["metadata"]["uid"]
    assert cluster.get("pods", "db-0", "default")["metadata"]["uid"] == replaced["uid"]
    assert len(attached(cluster)) == 1, "no attachment is released for a pod we did not delete"
    assert result.summary["pods_replaced"] == 1 and result.code == EXIT_OK


def test_attachment_of_another_pv_on_the_same_node_is_untouched(cluster, run_pass):
    fc.dead_node(cluster, "dead")
    stuck_workload(cluster, "dead")
    cluster.add(fc.attachment("pv-someone-else", "dead"))
    cluster.add(fc.attachment("pv-default-data-db-0", "worker-2"))  # same PV on another node

    result = run_pass()

    assert result.code == EXIT_OK
    deleted = [r.name for r in deletes(cluster) if r.resource == "volumeattachments"]
    assert len(deleted) == 1
    left = {(va["spec"]["nodeName"], va["spec"]["source"]["persistentVolumeName"])
            for va in attached(cluster)}
    assert left == {("dead", "pv-someone-else"), ("worker-2", "pv-default-data-db-0")}


@pytest.mark.parametrize("env, kwargs", [
    ({}, {"namespace": "kube-system"}),
    ({"EXCLUDE_NAMESPACES": "prod"}, {"namespace": "prod"}),
    ({"INCLUDE_NAMESPACES": "staging"}, {"namespace": "prod"}),
    ({"POD_SELECTOR": "app in (web)"}, {}),
    ({}, {"pod_annotations": {"rwo-failover.io/opt-out": "true"}}),
    ({}, {"claim_annotations": {"rwo-failover.io/opt-out": "true"}}),
])
def test_excluded_or_opted_out_pods_are_left_alone(cluster, run_pass, env, kwargs):
    fc.dead_node(cluster, "dead")
    stuck_workload(cluster, "dead", **kwargs)

    result = run_pass(**env)

    assert result.code == EXIT_OK
    assert deletes(cluster) == []  # the node itself may get the out-of-service taint: it is proven down
    assert [line["object"] for line in result.lines("skipped") if line["kind"] == "pod"]


@pytest.mark.parametrize("owner, annotations", [("DaemonSet", None), ("Node", {"kubernetes.io/config.mirror": "x"})])
def test_daemonset_and_mirror_pods_are_never_selected(cluster, run_pass, owner, annotations):
    fc.dead_node(cluster, "dead")
    fc.add_volume(cluster, "data", attached_to="dead")
    cluster.add(fc.pod("agent-x", "dead", claims=["data"], owner=owner, terminating=True, annotations=annotations))

    assert run_pass().code == EXIT_OK
    assert deletes(cluster) == []


def test_volume_shared_with_a_pod_left_in_place_stays_attached(cluster, run_pass):
    fc.dead_node(cluster, "dead")
    stuck_workload(cluster, "dead")
    cluster.add(fc.pod("db-reader", "dead", claims=["data-db-0"], terminating=True,
                       annotations={"rwo-failover.io/opt-out": "true"}))

    result = run_pass()

    assert result.code == EXIT_OK
    assert [r.resource for r in deletes(cluster)] == ["pods"]
    assert len(attached(cluster)) == 1


def test_node_that_recovers_before_acting_is_skipped(cluster, run_pass):
    fc.dead_node(cluster, "dead")
    stuck_workload(cluster, "dead")
    fc.revive_on_recheck(cluster, "dead")

    result = run_pass()

    assert deletes(cluster) == []
    assert result.code == EXIT_REFUSED, "a tainted node that is alive when re-read is split-brain"
    assert result.summary["nodes_not_down_on_recheck"] == 1


def test_taint_removed_before_acting_skips_the_node(cluster, run_pass):
    fc.dead_node(cluster, "dead")
    stuck_workload(cluster, "dead")

    def untaint(req):
        if req.verb == "get" and req.resource == "nodes":
            cluster.add(fc.node("dead", ready="Unknown", since=600, taints=[]))
        return None
    cluster.hooks.append(untaint)

    result = run_pass()

    assert deletes(cluster) == [] and result.code == EXIT_OK
    assert result.summary["nodes_not_down_on_recheck"] == 1


def test_pod_held_by_a_finalizer_keeps_its_attachment_and_fails_loudly(cluster, run_pass):
    # The force delete is accepted (200) but a finalizer keeps the pod; the attach-detach controller
    # would re-create any attachment deleted now, so it stays and the pass says why.
    fc.dead_node(cluster, "dead")
    pod = fc.pod("db-0", "dead", claims=["data-db-0"], terminating=True)
    pod["metadata"]["finalizers"] = ["example.com/protect"]
    fc.add_volume(cluster, "data-db-0", attached_to="dead")
    cluster.add(pod)

    result = run_pass()

    assert result.code == 1
    assert cluster.get("pods", "db-0", "default")["metadata"]["deletionTimestamp"]
    assert [r.resource for r in deletes(cluster)] == ["pods"]
    assert len(attached(cluster)) == 1
    assert any("example.com/protect" in line["message"] for line in result.logs if line["level"] == "ERROR")


def test_server_side_rejection_is_a_failure_not_silence(cluster, run_pass):
    fc.dead_node(cluster, "dead")
    stuck_workload(cluster, "dead")
    cluster.hooks.append(lambda req: Response(422, b'{"kind":"Status","message":"invalid"}')
                         if req.verb == "delete" else None)

    result = run_pass()

    assert result.code == 1
    assert result.summary["failures"] == 1
    assert len(attached(cluster)) == 1, "the attachment waits for its pod"


# --- MAX_PODS_PER_PASS caps what one pass deletes; it never stops the others (issue 18, attack) ---------------

def test_a_tenant_with_many_stuck_pods_cannot_stop_failover_for_everyone(api, run_pass):
    """Any tenant may create pods with spec.nodeName set to a dead node and delete them: they stay Terminating
    for good. 51 of them used to trip MAX_PODS_PER_PASS, which refused the whole pass, other tenants'
    outages included. The cap takes pods fairly across namespaces; the rest wait for later passes."""
    fc.outage(api, dead="dead", pods=("db-0",))
    fc.dead_node(api, "dead-2")
    fc.add_volume(api, "data-pg-0", namespace="prod", attached_to="dead-2")
    api.add(fc.pod("pg-0", "dead-2", namespace="prod", claims=["data-pg-0"], terminating=True))
    fc.add_volume(api, "junk", namespace="tenant")
    for i in range(51):
        api.add(fc.pod(f"junk-{i}", "dead", namespace="tenant", claims=["junk"], owner=None, terminating=True,
                       phase="Pending"))

    result = run_pass()

    assert api.get("pods", "pg-0", "prod") is None and api.get("pods", "db-0", "default") is None
    assert len([r for r in deletes(api) if r.resource == "pods"]) == 50, "MAX_PODS_PER_PASS=50 this pass"
    assert result.code == EXIT_OK and result.summary["pods_deferred"] == 3
    assert oos_taints(api, "dead") == [], "the taint would delete the deferred pods too: not this pass"


def test_pods_past_the_cap_are_deleted_by_later_passes(cluster, run_pass):
    fc.dead_node(cluster, "dead")
    for i in range(5):
        stuck_workload(cluster, "dead", claim=f"data-{i}", pod=f"db-{i}")
    first = run_pass(MAX_PODS_PER_PASS="3", OUT_OF_SERVICE_TAINT="never")
    assert len(cluster.objects("pods")) == 2 and first.summary["pods_deferred"] == 2 and first.code == EXIT_OK
    run_pass(MAX_PODS_PER_PASS="3", OUT_OF_SERVICE_TAINT="never")
    assert cluster.objects("pods") == [] and detached(cluster) == []


def test_the_caps_first_namespace_turns_so_stuck_pods_never_starve_a_later_namespace():
    """Pods held by a finalizer stay stuck and are planned again every pass: in a fixed order, namespaces that
    sort first would take the whole cap for ever (found by review). The first namespace turns each minute."""
    verdict = NodeVerdict("dead", NodeState.DOWN, fc.SHUTDOWN["key"], "down")
    pods = tuple(PodAction(ns, name, f"uid-{ns}", "dead", "stuck", (f"{ns}/data",))
                 for ns, name in (("a1", "x-0"), ("a2", "x-0"), ("prod", "db-0")))
    plans = (NodePlan(verdict, pods, add_taint=True),)

    taken = [{p.key for plan in cap_pods(plans, 2, minute)[0] for p in plan.pods} for minute in range(3)]

    assert all(len(keys) == 2 for keys in taken)
    assert all(any(key in keys for keys in taken) for key in ("a1/x-0", "a2/x-0", "prod/db-0")), taken
