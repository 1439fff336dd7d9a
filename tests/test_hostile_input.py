"""Hostile and odd input (issue 18): what tenants, proxies and the API itself may hand a pass, over HTTP.

Each test here reproduced a defect first (the issue's table, or what the fuzz tier in tests/test_fuzz.py
found on its own) and now keeps it fixed. The rule they all check: a bad object is skipped with a reason,
never stops the pass for anyone else, never raises out of it (exit 70), and never makes it act.
"""

from __future__ import annotations

import json
import time

import pytest
from helpers import attached

from rwo_failover.model import RECOVERY_ANNOTATION, RECOVERY_LABEL
from rwo_failover.run.exitcodes import EXIT_FAILED, EXIT_FORBIDDEN, EXIT_OK, EXIT_REFUSED
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import Fault


def released(api, pod: str = "db-0") -> bool:
    return api.get("pods", pod, "default") is None and not [
        a for a in attached(api) if a["spec"]["nodeName"] == "dead"]


def tenant_claim(api, name: str, record: object, namespace: str = "tenant") -> dict:
    """A claim whose owner wrote our recovery label and annotation on it (tenants may edit their claims)."""
    pvc, _pv, _va = fc.add_volume(api, name, namespace=namespace,
                                  annotations={RECOVERY_ANNOTATION: record if isinstance(record, str)
                                               else json.dumps(record)})
    pvc["metadata"]["labels"] = {RECOVERY_LABEL: "pending"}
    return api.add(pvc)


# --- row 1: the recovery record on a tenant's claim ------------------------------------------------------

def test_a_number_where_a_time_belongs_in_a_claims_recovery_record_does_not_stop_failover(api, run_pass):
    fc.outage(api)
    tenant_claim(api, "data", {"pod": "x-0", "uid": "u", "node": "n", "deletedAt": 1700000000})

    result = run_pass()

    assert result.code == EXIT_OK, result.logs[-3:]
    assert released(api)


def forged_record(api, namespace: str = "tenant") -> dict:
    """What a tenant can write on its own claim: a record that looks like ours in every checkable way, and a
    replacement Running and Ready elsewhere with the volume attached."""
    claim = api.get("persistentvolumeclaims", "data-web-0", namespace) or tenant_claim(api, "data-web-0", {})
    record = {"pod": "web-0", "uid": "0000-forged", "node": "gone", "controller": "ReplicaSet/web",
              "notReadySince": fc.stamp(86400 * 30), "deletedAt": fc.stamp(60),
              "claimUID": claim["metadata"]["uid"], "volume": claim["spec"]["volumeName"]}
    claim["metadata"]["annotations"][RECOVERY_ANNOTATION] = json.dumps(record)
    api.add(claim)
    api.add(fc.pod("web-1", "w1", namespace=namespace, claims=["data-web-0"], owner="ReplicaSet", ready="True"))
    api.add(fc.attachment(claim["spec"]["volumeName"], "w1"))
    return record


def test_a_forged_recovery_record_injects_no_event_and_no_failover_sample(api, kubeconfig):
    from rwo_failover import settings as config
    from rwo_failover.kube import Api, load_api_client
    from rwo_failover.run.metrics import Metrics
    from rwo_failover.run.runner import run_pass

    for i in range(3):
        fc.live_node(api, f"w{i}")
    forged_record(api)
    _args, settings = config.load(["--once"], {"KUBECONFIG": kubeconfig})
    metrics = Metrics()

    run_pass(Api(load_api_client(settings), settings), settings, metrics=metrics)

    assert not [e for e in api.objects("events") if e["reason"] == "RWOVolumeRecovered"]
    assert metrics.registry.get_sample_value("rwo_failover_failover_seconds_count") == 0.0


def test_a_tenants_recovery_record_never_makes_a_pass_list_its_namespace(api, run_pass):
    for i in range(3):
        fc.live_node(api, f"w{i}")
    forged_record(api)
    for i in range(30):
        api.add(fc.pod(f"filler-{i}", "w2", namespace="tenant", ready="True"))

    result = run_pass()

    assert result.code == EXIT_OK
    assert not [r for r in result.requests if r.verb == "list" and r.resource == "pods" and r.namespace == "tenant"]


# --- row 5: the Event read of a repeated Warning goes through the judged path ------------------------------

@pytest.fixture
def split_brain_next_to_an_outage(api, run_pass):
    fc.outage(api)
    fc.live_node(api, "alive", taints=[fc.SHUTDOWN])
    assert run_pass(MIN_NOT_READY_SECONDS="2000", PASS_TIMEOUT_SECONDS="3600").code == EXIT_REFUSED  # the Warning
    return api


@pytest.mark.parametrize("status, code", [(503, EXIT_REFUSED), (403, EXIT_FORBIDDEN)])
def test_a_failed_event_read_is_judged_like_any_failure_and_the_outage_still_fails_over(
        split_brain_next_to_an_outage, run_pass, status, code):
    api = split_brain_next_to_an_outage
    api.inject(Fault("status", verb="get", resource="events", status=status))

    result = run_pass(API_MAX_ATTEMPTS="2")

    assert result.code == code, [line for line in result.logs if line["level"] in ("ERROR", "CRITICAL")]
    assert released(api), "the proven-down node elsewhere is failed over"
    assert result.summary["failures"] >= 1


# --- row 6: Warnings that recur every pass are one Event ---------------------------------------------------

def test_a_pod_held_by_a_finalizer_is_one_warning_and_never_a_claim_of_release(api, run_pass):
    fc.outage(api)
    pod = api.get("pods", "db-0", "default")
    pod["metadata"]["finalizers"] = ["example.com/keep"]
    api.add(pod)

    codes = []
    for _ in range(3):
        codes.append(run_pass(API_MAX_ATTEMPTS="1").code)
        time.sleep(1.05)  # Event names carry the second: passes in the same second would hide a repeat

    assert codes == [EXIT_FAILED] * 3
    events = api.objects("events")
    assert not [e for e in events if e["reason"] == "RWOVolumesReleased"], \
        "nothing was released: no Event may say so"
    [held] = [e for e in events if e["type"] == "Warning" and e["involvedObject"]["name"] == "dead"]
    assert "example.com/keep" in held["message"] and held["count"] == 1


# --- what the fuzz tier (tests/test_fuzz.py) found on its own ----------------------------------------------

def warning_on(api, node: str, reason: str = "UnreadableObject") -> dict:
    [event] = [e for e in api.objects("events") if e["reason"] == reason and e["involvedObject"]["name"] == node]
    assert event["type"] == "Warning"
    return event


def test_a_node_with_a_field_of_the_wrong_type_is_skipped_and_the_outage_elsewhere_fails_over(api, run_pass):
    """Every parser, not only the record's, raised on a type-confused field: one odd Node was exit 70."""
    fc.outage(api)
    weird = fc.node("weird")
    weird["status"]["addresses"] = "10.0.0.5"
    api.add(weird)

    result = run_pass()

    assert result.code == EXIT_OK and released(api)
    [skip] = [line for line in result.lines("skipped") if line["object"] == "weird"]
    assert skip["kind"] == "node" and "addresses" in skip["reason"]
    assert "addresses" in warning_on(api, "weird")["message"]


def test_a_networkfence_that_cannot_be_read_does_not_stop_the_fenced_outage_next_to_it(api, run_pass):
    fc.outage(api)
    fc.live_node(api, "other")
    for name in ("dead", "other"):
        api.add({"apiVersion": "csiaddons.openshift.io/v1alpha1", "kind": "NetworkFence",
                 "metadata": {"name": name, "generation": 1,
                              "labels": {"app.kubernetes.io/managed-by": "rwo-failover"}},
                 "spec": {"fenceState": "Fenced", "cidrs": [f"{fc.internal_ip(name)}/32"]},
                 "status": {"result": "Succeeded", "message": "fencing operation successful"}})
    other = api.get("networkfences", "other")
    other["status"]["conditions"] = "Fenced"
    api.add(other)

    result = run_pass(FENCING="networkfence", NETWORK_FENCE_CLASS="ceph")

    assert result.code == EXIT_OK and released(api)
    assert "conditions" in warning_on(api, "other")["message"]


def test_a_volume_whose_access_modes_are_a_string_is_never_taken_for_exclusive(api, run_pass):
    """`frozenset("ReadWriteMany")` is a set of letters: an RWX volume written so was judged exclusive, and
    its pod force-deleted."""
    for i in range(3):
        fc.live_node(api, f"w{i}")
    fc.dead_node(api, "dead")
    _pvc, pv, _va = fc.add_volume(api, "shared", modes=["ReadWriteMany"], attached_to="dead")
    pv["spec"]["accessModes"] = "ReadWriteMany"
    api.add(pv)
    api.add(fc.pod("web-0", "dead", claims=["shared"], terminating=True))

    result = run_pass()

    assert api.get("pods", "web-0", "default") is not None and not [r for r in api.mutations()
                                                                   if r.verb == "delete"]
    assert result.code == EXIT_OK
    assert "pv-default-shared" in warning_on(api, "dead")["message"] or \
        "cannot be read" in warning_on(api, "dead")["message"]


def test_a_lease_duration_of_zero_or_less_never_makes_a_heartbeating_node_look_dead(api, run_pass):
    """leaseDurationSeconds -40 was taken as it is: a Lease renewed 5 s ago looked stale, and a NotReady node
    whose kubelet still heartbeats was proven down and failed over (docs/safety.md: "a low
    MIN_NOT_READY_SECONDS, even 0, never makes a fresh Lease count as stale")."""
    for i in range(3):
        fc.live_node(api, f"w{i}")
    api.add(fc.node("dead", ready="False", since=600, taints=[fc.SHUTDOWN]))
    api.add(fc.lease("dead", 5, duration=-40))
    fc.add_volume(api, "data-db-0", attached_to="dead")
    api.add(fc.pod("db-0", "dead", claims=["data-db-0"], terminating=True))

    result = run_pass(MIN_NOT_READY_SECONDS="0", ALLOW_UNSAFE="min-not-ready")

    assert api.get("pods", "db-0", "default") is not None and not [r for r in api.mutations()
                                                                   if r.verb == "delete"]
    assert "leaseDurationSeconds" in warning_on(api, "dead")["message"]
    assert result.code == EXIT_OK


def test_a_time_without_an_offset_is_never_read_in_this_process_time_zone(api, run_pass, monkeypatch):
    """A naive time was read in the local zone: in Auckland, a node NotReady for 10 s looked NotReady for 13 h."""
    import time as clock

    monkeypatch.setenv("TZ", "Pacific/Auckland")
    clock.tzset()
    try:
        for i in range(3):
            fc.live_node(api, f"w{i}")
        node = fc.node("dead", ready="Unknown", since=10, taints=[fc.SHUTDOWN])
        node["status"]["conditions"][-1]["lastTransitionTime"] = fc.stamp(10).rstrip("Z")
        api.add(node)
        fc.add_volume(api, "data-db-0", attached_to="dead")
        api.add(fc.pod("db-0", "dead", claims=["data-db-0"], terminating=True))

        result = run_pass()
    finally:
        monkeypatch.delenv("TZ")
        clock.tzset()

    assert api.get("pods", "db-0", "default") is not None and not [r for r in api.mutations()
                                                                   if r.verb == "delete"]
    assert "not an RFC 3339 time" in warning_on(api, "dead")["message"] and result.code == EXIT_OK


# --- answers of another JSON shape (issue 18 review) -------------------------------------------------------
# Complete, well-formed JSON, but not the object the API answers with: a proxy's, or a broken server's. Each is
# judged like a failed read or write; none may crash the pass.

@pytest.mark.parametrize("body", [b"[1]", b'"v1.30.0"', b"null", b'{"gitVersion": {"major": 1}}'])
def test_a_version_answer_of_another_shape_only_means_no_out_of_service_taint(api, run_pass, body):
    fc.outage(api)
    api.inject(Fault("reshape", verb="version", body=body))

    result = run_pass(API_MAX_ATTEMPTS="2")

    assert result.code == EXIT_OK and released(api)
    assert not [r for r in api.requests if r.verb == "patch" and r.resource == "nodes"], "no taint added"


@pytest.mark.parametrize("body", [b"[1]", b'"ok"'])
def test_a_pod_delete_answered_with_json_that_is_no_object_is_retried_like_a_lost_answer(api, run_pass, body):
    """The retry finds the pod gone (404), which confirms the delete: the volume is released in this pass."""
    fc.outage(api)
    api.inject(Fault("reshape", verb="delete", resource="pods", body=body))

    result = run_pass(API_MAX_ATTEMPTS="2")

    assert result.code == EXIT_OK and released(api)
    assert len([r for r in api.requests if r.verb == "delete" and r.resource == "pods"]) == 2


@pytest.mark.parametrize("body, attempts", [(b"[1]", "1"), (b'{"metadata": "x"}', "2"),
                                            (b'{"metadata": {"finalizers": 5}}', "2"),
                                            (b'{"metadata": {"finalizers": "example.com/keep"}}', "2")])
def test_a_pod_delete_whose_answer_cannot_be_read_is_unconfirmed_and_its_volume_kept(api, run_pass, body, attempts):
    """The delete lands, but no answer says whether finalizers hold the pod: the attachment is kept (the
    controller would re-create it for a held pod) until the next pass sees the pod gone."""
    fc.outage(api)
    api.inject(Fault("reshape", verb="delete", resource="pods", body=body))

    result = run_pass(API_MAX_ATTEMPTS=attempts)

    assert result.code == EXIT_FAILED and result.summary["unconfirmed"] == 1
    assert api.get("pods", "db-0", "default") is None and attached(api)
    api.faults.clear()
    assert run_pass().code == EXIT_OK and released(api)


def test_a_node_answer_without_a_resource_version_is_never_patched_unconditionally(api, run_pass):
    """The taint is added by a patch preconditioned on the resourceVersion read; an answer without one gives
    nothing to precondition on: a failure, never a crash, and never a patch that could overwrite a change."""
    fc.outage(api)
    node = api.get("nodes", "dead")
    del node["metadata"]["resourceVersion"]
    api.inject(Fault("reshape", verb="get", resource="nodes", name="dead", body=json.dumps(node).encode()))

    result = run_pass(OUT_OF_SERVICE_TAINT="always")

    # Two failures since issue 27: the taint, and the attachment it keeps (released only with the taint on).
    assert result.code == EXIT_FAILED and result.summary["failures"] == 2
    assert not [r for r in api.requests if r.verb == "patch" and r.resource == "nodes"]
    assert len(attached(api)) == 1


# --- seen in review ---------------------------------------------------------------------------------------

def test_a_name_a_tenant_wrote_never_becomes_another_path_of_the_api(api, run_pass):
    """A pod's claimName is not checked by the API server: "../../.." in it made observe GET another path
    (and a 403 there would have stopped the pass for everyone, exit 5)."""
    fc.outage(api)
    api.add(fc.pod("sneaky-0", "dead", claims=["../../../../../api/v1/nodes/w0"], terminating=True))

    result = run_pass()

    # The client resolves the dots: the GET would land on /api/v1/nodes/w0, a node read as a claim.
    assert not [(r.verb, r.resource, r.name) for r in result.requests if r.name == "w0" or not r.verb]
    assert result.code == EXIT_OK and released(api)
    assert api.get("pods", "sneaky-0", "default") is not None, "its claim cannot exist: nothing of it is touched"
