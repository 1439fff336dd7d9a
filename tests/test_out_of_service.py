"""The out-of-service handoff, its undo on recovery, and continuous mode."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT
from helpers import attached, detached, states

from rwo_failover.model import OUT_OF_SERVICE_KEY as OOS_KEY
from rwo_failover.run.exitcodes import EXIT_OK, EXIT_REFUSED
from rwo_testkit import fake_cluster as fc


@pytest.fixture
def cluster(api):
    for i in range(4):
        fc.live_node(api, f"w{i}")
    return api


def stuck(api, node: str, name: str = "db-0") -> None:
    fc.add_volume(api, f"data-{name}", attached_to=node)
    api.add(fc.pod(name, node, claims=[f"data-{name}"], terminating=True))


def oos_taints(api, node: str) -> list[dict]:
    return [t for t in api.get("nodes", node)["spec"].get("taints") or () if t["key"] == OOS_KEY]


def patches(api) -> list:
    return [r for r in api.requests if r.verb == "patch" and r.resource == "nodes"]


def test_taint_is_added_after_the_checks_and_before_any_delete(cluster, run_pass):
    fc.dead_node(cluster, "dead")
    stuck(cluster, "dead")

    result = run_pass()

    assert result.code == EXIT_OK
    [taint] = oos_taints(cluster, "dead")
    assert (taint["value"], taint["effect"]) == ("nodeshutdown", "NoExecute")
    node = cluster.get("nodes", "dead")
    assert [r["addedAt"] for r in fc.taint_records(cluster)] == [taint["timeAdded"]], "recorded as ours"
    assert {t["key"] for t in node["spec"]["taints"]} >= {"node.cloudprovider.kubernetes.io/shutdown",
                                                          "node.kubernetes.io/unreachable"}, "others kept"
    order = [(r.verb, r.resource) for r in result.requests if r.method != "GET"]
    assert order.index(("patch", "nodes")) < order.index(("delete", "pods"))
    [patch] = patches(cluster)
    assert patch.body["metadata"]["resourceVersion"], "the patch carries a resourceVersion precondition"
    assert patch.content_type == "application/merge-patch+json"
    assert result.summary["taints_added"] == 1
    assert "OutOfServiceTaintAdded" in {e["reason"] for e in cluster.objects("events")}


def test_no_taint_on_a_down_node_with_nothing_to_release(cluster, run_pass):
    """A stopped instance with nothing left on it: the taint would release nothing (issue 17)."""
    fc.dead_node(cluster, "dead")
    assert run_pass().code == EXIT_OK
    assert oos_taints(cluster, "dead") == [] and patches(cluster) == []


@pytest.mark.parametrize("setup, code", [
    (lambda api: fc.live_node(api, "alive", taints=[fc.SHUTDOWN]), EXIT_REFUSED),   # Ready: split-brain
    (lambda api: fc.dead_node(api, "alive", down_for=2), EXIT_OK),                  # not yet down (3 s)
])
def test_taint_is_not_added_to_a_node_that_is_not_proven_down(cluster, run_pass, setup, code):
    setup(cluster)
    stuck(cluster, "alive")
    result = run_pass()
    assert result.code == code
    assert patches(cluster) == [] and oos_taints(cluster, "alive") == []


def test_taint_is_not_added_when_the_brake_trips(cluster, run_pass):
    for n in range(3):
        fc.dead_node(cluster, f"dead-{n}")
        stuck(cluster, f"dead-{n}", name=f"db-{n}")
    result = run_pass(MAX_NODES_PER_PASS="2")
    assert result.code == EXIT_REFUSED and patches(cluster) == []


def test_taint_is_not_added_when_the_live_recheck_fails(cluster, run_pass):
    fc.dead_node(cluster, "dead")
    stuck(cluster, "dead")
    fc.revive_on_recheck(cluster, "dead")

    assert run_pass().code == EXIT_REFUSED
    assert patches(cluster) == []


def test_taint_is_not_duplicated_nor_claimed_when_already_there(cluster, run_pass):
    fc.dead_node(cluster, "dead", taints=[fc.OUT_OF_SERVICE])  # a human put it there
    stuck(cluster, "dead")

    result = run_pass()

    assert result.code == EXIT_OK
    assert patches(cluster) == [] and len(oos_taints(cluster, "dead")) == 1
    assert fc.taint_records(cluster) == [], "a human's taint is never recorded as ours"
    assert cluster.objects("pods") == [], "pods and attachments are still handled"


def test_taint_is_not_added_while_a_pod_on_the_node_is_opted_out(cluster, run_pass):
    fc.dead_node(cluster, "dead")
    stuck(cluster, "dead")
    fc.add_volume(cluster, "data-keep-0", attached_to="dead")
    cluster.add(fc.pod("keep-0", "dead", claims=["data-keep-0"], terminating=True,
                       annotations={"rwo-failover.io/opt-out": "true"}))

    result = run_pass()

    assert patches(cluster) == [] and result.code == EXIT_OK
    assert any("opted out" in line["reason"] for line in result.lines("skipped") if line["kind"] == "node")
    assert [p["metadata"]["name"] for p in cluster.objects("pods")] == ["keep-0"]


def test_concurrent_taint_writer_is_preserved_through_the_409_path(cluster, run_pass):
    fc.dead_node(cluster, "dead")
    stuck(cluster, "dead")
    raced = []

    def concurrent_writer(req):
        # Between our read and our patch, someone adds a taint: our patch must not erase it.
        if req.verb == "patch" and not raced:
            node = cluster.get("nodes", "dead")
            node["spec"]["taints"].append({"key": "example.com/maintenance", "effect": "NoSchedule"})
            cluster.add(node)
            raced.append(True)
        return None
    cluster.hooks.append(concurrent_writer)

    result = run_pass()

    assert [r.status for r in patches(cluster)] == [409, 200]
    keys = [t["key"] for t in cluster.get("nodes", "dead")["spec"]["taints"]]
    assert "example.com/maintenance" in keys and keys.count(OOS_KEY) == 1
    assert "node.cloudprovider.kubernetes.io/shutdown" in keys
    assert result.code == EXIT_OK


def test_persistent_conflicts_give_up_loudly_free_the_pods_and_keep_the_attachments(cluster, run_pass):
    """Issue 27 overturned "the fallback still releases the attachments": storage that fences on the taint
    (ceph-csi 3.15+) skips its fencing for an attachment released while the node is untainted. The pods go."""
    fc.dead_node(cluster, "dead")
    stuck(cluster, "dead")

    def always_race(req):
        if req.verb == "patch":
            cluster.add(cluster.get("nodes", "dead"))  # bumps resourceVersion every time
        return None
    cluster.hooks.append(always_race)

    result = run_pass()

    assert len(patches(cluster)) == 5 and result.code == 1
    assert cluster.objects("pods") == [], "the pods are still freed"
    assert len(attached(cluster)) == 1, "no attachment released before the taint is on"


@pytest.mark.parametrize("env, version, added", [
    ({"OUT_OF_SERVICE_TAINT": "never"}, "v1.36.0", False),
    ({}, "v1.27.9", False),
    ({}, "v1.28.0", True),
    ({"OUT_OF_SERVICE_TAINT": "always"}, "v1.27.9", True),
])
def test_mode_and_server_version(cluster, run_pass, env, version, added):
    cluster.version = version
    fc.dead_node(cluster, "dead")
    stuck(cluster, "dead")

    result = run_pass(**env)

    assert result.code == EXIT_OK and cluster.objects("pods") == [] and detached(cluster) == []
    assert bool(oos_taints(cluster, "dead")) is added
    version_reads = [r for r in result.requests if r.path == "/version"]
    assert len(version_reads) == (0 if env else 1), "only auto asks the server its version"


def test_dry_run_only_says_it_would_add_the_taint(cluster, run_pass):
    fc.dead_node(cluster, "dead")
    stuck(cluster, "dead")
    result = run_pass(DRY_RUN="true")
    assert patches(cluster) == [] and result.lines("dry-run: would add the out-of-service taint")


def recovered_node(api, name: str, ready_for: float, ours: bool = True) -> None:
    node = fc.node(name, ready="True", since=ready_for, taints=[fc.our_taint() if ours else fc.OUT_OF_SERVICE])
    api.add(fc.mark_ours(api, node) if ours else node)
    api.add(fc.lease(name, 2))


def test_our_taint_is_removed_once_the_node_is_ready_long_enough(cluster, run_pass):
    recovered_node(cluster, "back", ready_for=120)

    result = run_pass()

    assert result.code == EXIT_OK and oos_taints(cluster, "back") == []
    assert fc.taint_records(cluster) == []
    assert result.summary["taints_removed"] == 1 and result.summary["split_brain"] == 0
    assert "OutOfServiceTaintRemoved" in {e["reason"] for e in cluster.objects("events")}


def test_our_taint_stays_while_the_node_is_not_back_for_long_enough(cluster, run_pass):
    recovered_node(cluster, "back", ready_for=10)
    result = run_pass()
    assert result.code == EXIT_OK, "recovering is not split-brain"
    assert patches(cluster) == [] and len(oos_taints(cluster, "back")) == 1
    assert result.summary["recovering"] == 1


def test_our_taint_stays_without_a_fresh_lease(cluster, run_pass):
    recovered_node(cluster, "back", ready_for=120)
    cluster.add(fc.lease("back", 300))
    result = run_pass()
    assert patches(cluster) == [] and len(oos_taints(cluster, "back")) == 1
    # What must happen (issue 37: this passed when every pass crashed): judged recovering, and the skip says the
    # taint waits for a fresh Lease; no Event, exit 0.
    assert result.code == EXIT_OK and states(result) == {"back": "recovering"}
    assert {"object": "back", "reason": "our out-of-service taint stays until the node's Lease is fresh"} in \
        [{"object": line["object"], "reason": line["reason"]} for line in result.lines("skipped")]
    assert result.summary["taints_removed"] == 0 and cluster.mutations() == []


def test_a_human_out_of_service_taint_is_never_removed(cluster, run_pass):
    recovered_node(cluster, "back", ready_for=3600, ours=False)
    result = run_pass()
    assert result.code == EXIT_REFUSED, "tainted by a human yet alive: split-brain, for a human to look at"
    assert patches(cluster) == [] and len(oos_taints(cluster, "back")) == 1


def test_continuous_mode_finishes_the_pass_in_flight_on_sigterm(cluster, kubeconfig):
    fc.dead_node(cluster, "dead-0")
    for n in range(3):
        stuck(cluster, "dead-0", name=f"db-{n}")
    cluster.hooks.append(lambda req: time.sleep(0.3) if req.verb == "delete" else None)
    env = {"KUBECONFIG": kubeconfig, "PATH": "/usr/bin:/bin", "LOG_FORMAT": "json", "INTERVAL": "1",
           "METRICS_PORT": "0"}
    proc = subprocess.Popen([sys.executable, str(ROOT / "reconcile.py")], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not any(r.verb == "delete" for r in cluster.requests) and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)  # mid-pass: the first delete is being served
    out, err = proc.communicate(timeout=60)

    assert proc.returncode == EXIT_OK, err
    logs = [json.loads(line) for line in out.splitlines()]
    messages = [line["message"] for line in logs]
    assert "stop requested; the pass in flight has finished" in messages and messages[-1] == "stopped cleanly"
    stopped = messages.index("stop requested; the pass in flight has finished")
    assert "pass triggered" not in messages[stopped:], "no new pass started after the signal"
    in_flight = [line for line in logs[:stopped] if line["message"] == "pass finished"][-1]
    assert in_flight["pods_deleted"] == 3, "the pass in flight finished"
    assert cluster.objects("pods") == [] and detached(cluster) == []


@pytest.mark.parametrize("text, expected", [
    ("v1.36.0", (1, 36)), ("v1.29.3-eks-4f4795d", (1, 29)), ("v1.27.10-gke.1055000", (1, 27)),
    ("v1.30.2+k3s1", (1, 30)), ("1.28.0", (1, 28)), ("", None), ("devel", None),
])
def test_server_versions_from_every_vendor_parse(text, expected):
    from rwo_failover.kube import parse_version
    assert parse_version(text) == expected


def test_unparsable_server_version_means_no_taint_in_auto(cluster, run_pass):
    cluster.version = "devel"
    fc.dead_node(cluster, "dead")
    assert run_pass().code == EXIT_OK
    assert patches(cluster) == []


def test_failing_version_read_degrades_to_no_taint_and_the_pass_still_works(cluster, run_pass):
    from rwo_testkit.fake_apiserver import Response
    cluster.hooks.append(lambda req: Response(503, b"{}") if req.path == "/version" else None)
    fc.dead_node(cluster, "dead")
    stuck(cluster, "dead")

    result = run_pass(API_MAX_ATTEMPTS="2")

    assert result.code == EXIT_OK and patches(cluster) == []
    assert cluster.objects("pods") == [] and detached(cluster) == []
    assert result.lines("cannot read the server version; not adding the out-of-service taint")
