"""Liveness by observed change (issue 17): each test here reproduces a case the issue measured, and failed on
the code before it. Ages are measured on the API server's clock only: the Date header of its answers, and the
managedFields times it stamps when an object changes. A node's own timestamps never decide anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Optional

import pytest

from conftest import ROOT
from rwo_failover.exitcodes import EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import Fault, Response

from helpers import (deletes, oos_taints, patches, pod_names, recovery_records, skewed_pass, states, stuck,
                     tainted_node)


@pytest.fixture
def cluster(api):
    for i in range(4):
        fc.live_node(api, f"w{i}")
    return api


def warnings(api) -> list[str]:
    return [e["reason"] for e in api.objects("events") if e["type"] == "Warning"]


def keep_renewing(api, node: str, clock_offset: float = 0.0) -> None:
    """A live kubelet: every read of its Lease finds a newer renewal than the last one."""
    def renew(req) -> None:
        if req.verb == "get" and req.resource == "leases" and req.name == node:
            api.add(fc.lease(node, 0, clock_offset=clock_offset))
    api.hooks.append(renew)


# --- 1. A normal outage never cries wolf -----------------------------------------------------------------

def test_a_lease_renewed_before_notready_is_not_yet_however_fresh(cluster, run_pass):
    """Node-monitor grace 20 s, the kubelet's 40 s Lease: the node renewed, died, and 20 s later the node
    lifecycle controller set Ready=Unknown. 25 s after the renewal the Lease looks fresh, but it was renewed
    before NotReady: the node has not heartbeat since. Not yet: exit 0, no Warning."""
    tainted_node(cluster, "n", not_ready_for=5, lease_renewed_ago=25)
    stuck(cluster, "n")

    result = run_pass()

    assert states(result) == {"n": "not-yet"}
    assert result.code == EXIT_OK and warnings(cluster) == [] and deletes(cluster, "pods") == []


def test_a_lease_renewed_after_notready_and_still_within_its_duration_is_split_brain(cluster, run_pass):
    tainted_node(cluster, "n", not_ready_for=30, lease_renewed_ago=10)
    stuck(cluster, "n")

    result = run_pass()

    assert states(result) == {"n": "split-brain"} and result.code == EXIT_REFUSED
    assert warnings(cluster) == ["ShutdownTaintOnLiveNode"] and deletes(cluster, "pods") == []


# --- 2. A slow kubelet clock never makes a live node look dead -----------------------------------------

def test_a_slow_kubelet_clock_never_makes_a_live_node_look_dead(cluster, run_pass):
    """The kubelet's clock runs 100 s behind. It renews its Lease every few seconds, posts Ready=False (its
    container runtime is down) and carries a shutdown taint by mistake. Its renewTime and its Ready
    transition look 100 s old; nothing it stamped may decide."""
    cluster.add(fc.node("n", ready="False", since=30, taints=[fc.SHUTDOWN], clock_offset=-100))
    cluster.add(fc.lease("n", 2, clock_offset=-100))
    stuck(cluster, "n")
    keep_renewing(cluster, "n", clock_offset=-100)

    result = run_pass()

    assert states(result) == {"n": "split-brain"} and result.code == EXIT_REFUSED
    assert deletes(cluster, "pods") == [] and deletes(cluster, "volumeattachments") == []
    assert patches(cluster) == [] and oos_taints(cluster, "n") == []


def test_ready_false_is_the_kubelets_own_report_and_never_down(cluster, run_pass):
    """Ready=False was posted by a kubelet that was alive to post it; only the node lifecycle controller's
    Ready=Unknown ("Kubelet stopped posting node status") says it went silent."""
    cluster.add(fc.node("n", ready="False", since=600, taints=[fc.SHUTDOWN]))
    cluster.add(fc.lease("n", 700))
    stuck(cluster, "n")

    result = run_pass()

    assert states(result) == {"n": "not-yet"} and result.code == EXIT_OK
    assert deletes(cluster, "pods") == []


# --- 3. No Date header, no judgment ------------------------------------------------------------------------

def test_without_a_date_header_nothing_is_judged_and_the_pass_exits_4(cluster, kubeconfig):
    """A proxy strips Date, and the job's clock runs 5 min fast: judged on it, a node that renewed 35 s ago
    would look down. No judgment is made on any clock but the server's."""
    tainted_node(cluster, "n", not_ready_for=30, lease_renewed_ago=35)
    stuck(cluster, "n")
    cluster.omit_date_header = True

    result = skewed_pass(kubeconfig, 300)

    assert result.code == EXIT_UNAVAILABLE
    errors = [line for line in result.logs if line.get("level") == "ERROR"]
    assert any("Date" in json.dumps(line) for line in errors), errors
    assert cluster.mutations() == []


# --- 4. Stopped nodes never block failover -----------------------------------------------------------------

def stopped(api, name: str) -> None:
    """A stopped instance: its Node kept, with the cloud's shutdown taint, for a day; nothing left on it."""
    fc.dead_node(api, name, down_for=86400)


def test_stopped_nodes_with_nothing_to_release_never_trip_the_node_brake(api, run_pass):
    for i in range(8):
        fc.live_node(api, f"w{i}")
    for i in range(6):
        stopped(api, f"stopped-{i}")
    fc.dead_node(api, "dead")
    stuck(api, "dead")

    result = run_pass()

    assert result.code == EXIT_OK, result.summary
    assert pod_names(api) == set() and api.objects("volumeattachments") == []
    assert all(oos_taints(api, f"stopped-{i}") == [] for i in range(6)), "nothing to release: no taint"


def test_stopped_nodes_with_nothing_to_release_never_count_toward_the_unhealthy_fraction(api, run_pass):
    for i in range(3):
        fc.live_node(api, f"w{i}")
    for i in range(6):
        stopped(api, f"stopped-{i}")
    fc.dead_node(api, "dead")
    stuck(api, "dead")

    result = run_pass()  # 7 of 10 not Ready; of the nodes with anything on them, 1 of 4

    assert result.code == EXIT_OK, result.summary
    assert pod_names(api) == set()


def test_a_partition_still_brakes(api, run_pass):
    """Nodes that are merely NotReady (no shutdown taint: the cloud says they run) still count."""
    for i in range(3):
        fc.live_node(api, f"w{i}")
    for i in range(6):
        api.add(fc.node(f"cut-{i}", ready="Unknown", since=600, taints=[fc.UNREACHABLE]))
        api.add(fc.lease(f"cut-{i}", 640))
    fc.dead_node(api, "dead")
    stuck(api, "dead")

    result = run_pass()

    assert result.code == EXIT_REFUSED and result.summary["brake"] == "unhealthy-fraction"
    assert deletes(api, "pods") == []


# --- 5. Every destructive write has its own live verdict ------------------------------------------------

def test_a_node_that_comes_back_between_attachment_deletes_keeps_the_rest(cluster, run_pass):
    fc.dead_node(cluster, "dead")
    for claim in ("data-a", "data-b"):
        fc.add_volume(cluster, claim, attached_to="dead")
    cluster.add(fc.pod("db-0", "dead", claims=["data-a", "data-b"], terminating=True))

    def revive_after_first(req) -> None:
        if req.verb == "delete" and req.resource == "volumeattachments":
            cluster.add(fc.node("dead", ready="True", since=1, taints=[fc.SHUTDOWN]))
            cluster.add(fc.lease("dead", 0))
    cluster.hooks.append(revive_after_first)

    result = run_pass(OUT_OF_SERVICE_TAINT="never")

    assert len(deletes(cluster, "volumeattachments")) == 1, "the second attachment stays with the live node"
    assert len(cluster.objects("volumeattachments")) == 1
    assert result.code == EXIT_REFUSED and result.summary["nodes_not_down_on_recheck"] == 1


def test_each_pod_delete_has_its_own_live_verdict(cluster, run_pass):
    fc.dead_node(cluster, "dead")
    for name in ("db-0", "db-1", "db-2"):
        stuck(cluster, "dead", name=name)

    def renew_on_first_delete(req) -> None:
        if req.verb == "delete" and req.resource == "pods":
            cluster.add(fc.lease("dead", 0))
    cluster.hooks.append(renew_on_first_delete)

    result = run_pass(OUT_OF_SERVICE_TAINT="never")

    assert len(deletes(cluster, "pods")) == 1, "its Lease changed while the pass watched: the rest stay"
    assert deletes(cluster, "volumeattachments") == []
    assert result.code == EXIT_REFUSED


# --- 6. A deposed leader writes nothing more ---------------------------------------------------------------

def test_a_leader_whose_lease_lapses_mid_pass_sends_no_more_writes(api, kubeconfig):
    """The leader's renewals stop reaching the server (a 503 each) while its pass is deleting, and each delete
    answers slowly. Once its Lease could have lapsed, so that a standby could lead, no write may leave it."""
    for i in range(3):
        fc.live_node(api, f"w{i}")
    fc.dead_node(api, "dead")
    for i in range(6):
        stuck(api, "dead", name=f"db-{i}")
    lease_seconds = 4
    renewals: list[float] = []

    def world(req) -> Optional[Response]:
        if req.resource == "leases" and req.verb in ("create", "update") and req.namespace == "rwo-failover":
            if deletes(api, "pods"):
                return Response(503, b'{"kind":"Status","code":503}', {"Content-Type": "application/json"})
            renewals.append(time.monotonic())
        if req.verb == "delete" and req.resource == "pods":
            time.sleep(0.8)
        return None
    api.hooks.append(world)
    env = {**os.environ, "KUBECONFIG": kubeconfig, "LOG_FORMAT": "json", "INTERVAL": "0.5",
           "LEADER_ELECTION": "true", "LEADER_ELECTION_LEASE_SECONDS": str(lease_seconds),
           "REQUEST_TIMEOUT_SECONDS": "1", "LEADER_ELECTION_NAMESPACE": "rwo-failover", "METRICS_PORT": "0",
           "OUT_OF_SERVICE_TAINT": "never", "API_MAX_ATTEMPTS": "1"}
    proc = subprocess.Popen([sys.executable, str(ROOT / "reconcile.py")], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(deletes(api, "pods")) < 6 and \
                not (renewals and time.monotonic() > renewals[-1] + 3 * lease_seconds):
            time.sleep(0.2)
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    sent = deletes(api, "pods")
    assert renewals, f"it never led: {err[-2000:]}"
    assert len(sent) < 6, "it kept deleting after its Lease could have lapsed"
    lapse = renewals[-1] + lease_seconds
    assert sent and all(r.at < lapse for r in sent), "a delete reached the server after a standby could lead"
    assert "no longer" in out and "leader" in out


# --- 7. Completed pods -------------------------------------------------------------------------------------

@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_completed_pod_is_left_alone_and_its_volume_released_without_a_recovery_watch(cluster, run_pass, phase):
    """Nothing runs in a completed pod, and a terminated pod never holds a name (the API server deletes it at
    once): deleting it frees nothing. Its exclusive volume's attachment still pins the volume to the dead
    node, so that is released, and no replacement is expected."""
    fc.dead_node(cluster, "dead")
    fc.add_volume(cluster, "data-job-0", attached_to="dead")
    cluster.add(fc.pod("job-0", "dead", claims=["data-job-0"], owner="Job", phase=phase, ready="False"))

    result = run_pass(OUT_OF_SERVICE_TAINT="never")

    assert pod_names(cluster) == {"job-0"} and deletes(cluster, "pods") == []
    assert cluster.objects("volumeattachments") == []
    assert recovery_records(cluster) == [], "no replacement will come for a completed pod"
    assert result.code == EXIT_OK


# --- Also seen -----------------------------------------------------------------------------------------------

def test_a_daemonset_pod_on_an_opted_out_claim_blocks_the_taint(cluster, run_pass):
    """The out-of-service taint lets Kubernetes evict every pod on the node, DaemonSet pods included, and
    force-detach their volumes: an opt-out says no, whoever owns the pod."""
    fc.dead_node(cluster, "dead")
    stuck(cluster, "dead")
    fc.add_volume(cluster, "agent-data", attached_to="dead", annotations={"rwo-failover.io/opt-out": "true"})
    cluster.add(fc.pod("agent-x", "dead", claims=["agent-data"], owner="DaemonSet", terminating=True))

    result = run_pass()

    assert oos_taints(cluster, "dead") == []
    assert pod_names(cluster) == {"agent-x"} and result.code == EXIT_OK


def test_a_taint_removal_whose_answer_is_lost_counts_as_removed(cluster, run_pass):
    cluster.add(fc.mark_ours(fc.node("back", ready="True", since=600, taints=[fc.our_taint()])))
    cluster.add(fc.lease("back", 2))
    cluster.inject(Fault("reset", verb="patch", resource="nodes", first=1))

    result = run_pass()

    assert oos_taints(cluster, "back") == []
    assert result.summary["taints_removed"] == 1
    assert "OutOfServiceTaintRemoved" in [e["reason"] for e in cluster.objects("events")]


def test_a_pod_delete_whose_answer_is_lost_still_gets_its_recovery_watched(cluster, run_pass):
    fc.dead_node(cluster, "dead")
    stuck(cluster, "dead")
    cluster.inject(Fault("reset", verb="delete", resource="pods", first=1))

    result = run_pass(OUT_OF_SERVICE_TAINT="never")

    assert pod_names(cluster) == set() and result.summary["pods_deleted"] == 1
    assert [r["claim"] for r in recovery_records(cluster)] == ["default/data-db-0"]



# --- Found by the stateful test --------------------------------------------------------------------------

def test_our_own_taint_never_stands_in_for_the_shutdown_taint_that_went(cluster, run_pass):
    """The cloud removes its shutdown taint mid-pass (the instance runs again) while the node is still silent:
    what proved it shut down is gone. The out-of-service taint we added on that evidence proves nothing by
    itself, so nothing more is deleted there."""
    fc.dead_node(cluster, "dead")
    for name in ("db-0", "db-1"):
        stuck(cluster, "dead", name=name)

    def instance_starts(req) -> None:
        if req.verb == "delete" and req.resource == "pods":
            node = cluster.get("nodes", "dead")
            node["spec"]["taints"] = [t for t in node["spec"]["taints"] if t["key"] != fc.SHUTDOWN["key"]]
            cluster.add(node)
    cluster.hooks.append(instance_starts)

    result = run_pass(OUT_OF_SERVICE_TAINT="always")

    assert len(deletes(cluster, "pods")) == 1 and deletes(cluster, "volumeattachments") == []
    assert result.summary["nodes_not_down_on_recheck"] == 1
