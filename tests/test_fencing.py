"""Fencing before the volume moves (issue 14): csi-addons NetworkFence and the fence webhook, over HTTP.

The adversarial rule runs through all of it: with fencing enabled and not confirmed, no pod, attachment
or taint is touched.
"""

from __future__ import annotations

import json

import pytest

from rwo_failover.exitcodes import EXIT_FAILED, EXIT_OK
from rwo_failover.model import OUT_OF_SERVICE_KEY
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fence_server import FenceServer

FENCE_CLASS = "ceph-rbd-fence"


@pytest.fixture
def cluster(api):
    fc.outage(api)  # w0..w2 live; "dead" down 600 s with db-0 stuck and its RWO volume attached
    return api


def fence_of(api, node: str = "dead") -> dict:
    return api.get("networkfences", node)


def set_result(api, result: str, message: str = "", node: str = "dead") -> None:
    """The storage's fencing controller answers, as csi-addons' does: a result, a message, and a condition
    that observed the current generation (in-process, as the fixture's stand-in for that controller)."""
    fence = fence_of(api, node)
    unfence = fence["spec"]["fenceState"] == "Unfenced"
    default = "unfencing operation successful" if unfence else "fencing operation successful"
    fence["status"] = {"result": result, "message": message or default, "conditions": [
        {"type": "Fenced", "status": "False" if unfence else "True", "reason": result,
         "observedGeneration": fence["metadata"]["generation"], "message": message or default,
         "lastTransitionTime": fc.stamp(0)}]}
    api.add(fence)


def untouched(api) -> bool:
    """Nothing on the node was touched: no pod or attachment delete, no node patch."""
    return not [r for r in api.requests if (r.verb, r.resource) in
                (("delete", "pods"), ("delete", "volumeattachments"), ("patch", "nodes"))]


def networkfence(run_pass, **env):
    return run_pass(FENCING="networkfence", NETWORK_FENCE_CLASS=FENCE_CLASS, **env)


def test_one_networkfence_then_nothing_until_it_succeeds_then_the_failover(cluster, run_pass):
    first = networkfence(run_pass)

    fence = fence_of(cluster)
    assert fence["spec"] == {"fenceState": "Fenced", "networkFenceClassName": FENCE_CLASS, "cidrs": ["10.0.0.1/32"]}
    assert fence["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "rwo-failover"}
    assert first.code == EXIT_OK and first.summary["fencing_pending"] == 1 and untouched(cluster)

    pending = networkfence(run_pass)
    assert pending.code == EXIT_OK and untouched(cluster), "pending across passes: still nothing touched"
    creates = [r for r in cluster.requests if r.verb == "create" and r.resource == "networkfences"]
    assert len(creates) == 1, "never a second object for the same node"

    set_result(cluster, "Succeeded")
    done = networkfence(run_pass)
    assert done.code == EXIT_OK and cluster.objects("pods") == [] and cluster.objects("volumeattachments") == []
    assert [t["key"] for t in cluster.get("nodes", "dead")["spec"]["taints"]].count(OUT_OF_SERVICE_KEY) == 1


def test_a_failed_fence_is_a_warning_and_exit_1_with_nothing_touched(cluster, run_pass):
    networkfence(run_pass)
    set_result(cluster, "Failed", "ceph: blocklist add refused")

    result = networkfence(run_pass)

    assert result.code == EXIT_FAILED and untouched(cluster)
    [event] = [e for e in cluster.objects("events") if e["reason"] == "FencingFailed"]
    assert event["type"] == "Warning" and "ceph: blocklist add refused" in event["message"]


def test_a_networkfence_that_is_not_ours_is_never_replaced_nor_trusted(cluster, run_pass):
    cluster.add({"apiVersion": "csiaddons.openshift.io/v1alpha1", "kind": "NetworkFence",
                 "metadata": {"name": "dead"}, "spec": {"fenceState": "Fenced", "cidrs": ["10.0.0.1/32"]},
                 "status": {"result": "Succeeded"}})
    result = networkfence(run_pass)
    assert result.code == EXIT_FAILED and untouched(cluster)
    assert not [r for r in cluster.requests if r.resource == "networkfences" and r.verb != "list"]


def test_an_ipv6_address_is_fenced_as_a_128(cluster, run_pass):
    node = cluster.get("nodes", "dead")
    node["status"]["addresses"] = [{"type": "InternalIP", "address": "fd00::7"},
                                   {"type": "InternalIP", "address": "10.0.0.7"}]
    cluster.add(node)
    networkfence(run_pass)
    assert fence_of(cluster)["spec"]["cidrs"] == ["fd00::7/128", "10.0.0.7/32"]


def test_unfence_on_recovery_before_our_taint_comes_off(cluster, run_pass):
    networkfence(run_pass)
    set_result(cluster, "Succeeded")
    networkfence(run_pass)
    back = fc.node("dead", ready="True", since=300, taints=[fc.our_taint()])
    cluster.add(fc.mark_ours(back, cluster.get("nodes", "dead")["metadata"]["annotations"]
                             ["rwo-failover.io/out-of-service-added-at"]))
    node = cluster.get("nodes", "dead")
    node["spec"]["taints"] = [dict(fc.OUT_OF_SERVICE, timeAdded=node["metadata"]["annotations"]
                                   ["rwo-failover.io/out-of-service-added-at"])]
    cluster.add(node)
    cluster.add(fc.lease("dead", 2))

    asked = networkfence(run_pass)
    assert fence_of(cluster)["spec"]["fenceState"] == "Unfenced" and asked.code == EXIT_OK
    assert len([t for t in cluster.get("nodes", "dead")["spec"]["taints"] if t["key"] == OUT_OF_SERVICE_KEY]) == 1
    waiting = networkfence(run_pass)
    assert fence_of(cluster) and waiting.code == EXIT_OK, "no answer yet: the object and our taint stay"
    set_result(cluster, "Succeeded")
    networkfence(run_pass)
    assert fence_of(cluster) is None, "unfenced, then deleted"
    final = networkfence(run_pass)
    assert final.summary["taints_removed"] == 1
    assert not [t for t in cluster.get("nodes", "dead")["spec"]["taints"] if t["key"] == OUT_OF_SERVICE_KEY]


def test_once_fenced_a_node_is_acted_on_after_its_lease_duration_not_min_not_ready(api, run_pass):
    for i in range(3):
        fc.live_node(api, f"w{i}")
    fc.dead_node(api, "dead", down_for=45)  # NotReady 45 s, Lease 85 s old: under MIN (60), over the lease (40)
    fc.add_volume(api, "data-db-0", attached_to="dead")
    api.add(fc.pod("db-0", "dead", claims=["data-db-0"], terminating=True))
    assert run_pass().summary["not_yet"] == 1, "without fencing: not yet"
    networkfence(run_pass)
    set_result(api, "Succeeded")
    assert networkfence(run_pass).code == EXIT_OK and api.objects("pods") == []


# --- the fence webhook --------------------------------------------------------------------------------------

@pytest.fixture
def fencer():
    with FenceServer() as server:
        yield server


def webhook(run_pass, fencer, tmp_path, **env):
    token = tmp_path / "token"
    token.write_text("s3cret-fence-token\n")
    return run_pass(FENCING="webhook", FENCE_WEBHOOK_URL=fencer.url, FENCE_WEBHOOK_TOKEN_FILE=str(token),
                    FENCE_WEBHOOK_CA_FILE=fencer.ca_file, **env)


def test_the_webhook_is_asked_with_the_node_and_a_yes_releases_it_in_the_same_pass(cluster, run_pass, fencer,
                                                                                    tmp_path):
    result = webhook(run_pass, fencer, tmp_path)

    assert result.code == EXIT_OK and cluster.objects("pods") == [] and cluster.objects("volumeattachments") == []
    [request] = fencer.requests
    assert request["headers"]["Authorization"] == "Bearer s3cret-fence-token"
    node = cluster.get("nodes", "dead")
    assert request["body"] == {"node": "dead", "uid": node["metadata"]["uid"], "providerID": node["spec"]["providerID"],
                               "addresses": ["10.0.0.1"], "taint": "node.cloudprovider.kubernetes.io/shutdown",
                               "reason": request["body"]["reason"]}
    assert "Ready=Unknown" in request["body"]["reason"]
    assert "s3cret" not in json.dumps(result.logs) + result.stderr, "the token is never logged"


@pytest.mark.parametrize("answer, delay, env, why", [
    ((500, {"error": "ipmi down"}), 0, {"API_MAX_ATTEMPTS": "3"}, "HTTP 500"),
    ((200, {"fenced": "yes"}), 0, {}, "not {\"fenced\": true}"),
    ((200, {}), 0, {}, "not {\"fenced\": true}"),
    ((200, b"fenced"), 0, {}, "not JSON"),
    ((403, {"fenced": True}), 0, {}, "HTTP 403"),
    ((200, {"fenced": True}), 2.0, {"REQUEST_TIMEOUT_SECONDS": "0.3", "API_MAX_ATTEMPTS": "2"}, "timed out"),
])
def test_anything_but_a_clear_yes_means_not_fenced(cluster, run_pass, fencer, tmp_path, answer, delay, env, why):
    fencer.answer, fencer.delay = answer, delay

    result = webhook(run_pass, fencer, tmp_path, **env)

    assert result.code == EXIT_FAILED and untouched(cluster)
    [event] = [e for e in cluster.objects("events") if e["reason"] == "FencingFailed"]
    assert event["type"] == "Warning" and why in event["message"]
    if answer[0] == 500:
        assert len(fencer.requests) == 3, "5xx is retried up to API_MAX_ATTEMPTS"


def test_tls_is_always_verified(cluster, run_pass, fencer):
    result = run_pass(FENCING="webhook", FENCE_WEBHOOK_URL=fencer.url)  # no CA file: the system's CAs
    assert result.code == EXIT_FAILED and untouched(cluster) and fencer.requests == []
    [event] = [e for e in cluster.objects("events") if e["reason"] == "FencingFailed"]
    assert "TLS" in event["message"] or "certificate" in event["message"]


def test_fencing_webhook_needs_an_https_url(run_pass):
    assert run_pass(FENCING="webhook").code == 2
    assert run_pass(FENCING="webhook", FENCE_WEBHOOK_URL="http://fencer.example/fence").code == 2


def test_a_fence_that_appears_between_the_look_and_the_create_is_not_touched(cluster, run_pass):
    """Someone else creates a NetworkFence for the node after we listed: our create gets 409, and we neither
    patch theirs nor act; the next pass judges whose it is."""
    def racing_create(req):
        if req.verb == "create" and req.resource == "networkfences" and not cluster.get("networkfences", "dead"):
            cluster.add({"apiVersion": "csiaddons.openshift.io/v1alpha1", "kind": "NetworkFence",
                         "metadata": {"name": "dead"}, "spec": {"fenceState": "Fenced", "cidrs": ["10.0.0.1/32"]}})
        return None
    cluster.hooks.append(racing_create)

    result = networkfence(run_pass)

    assert result.code == EXIT_OK and untouched(cluster)
    assert not [r for r in cluster.requests if r.resource == "networkfences" and r.verb == "patch"]
    assert networkfence(run_pass).code == EXIT_FAILED, "the next pass sees it is not ours"


def test_our_unfenced_fence_is_fenced_again_when_the_node_dies_again(cluster, run_pass):
    networkfence(run_pass)
    fence = fence_of(cluster)
    fence["spec"]["fenceState"] = "Unfenced"
    cluster.add(fence)
    set_result(cluster, "Succeeded")
    result = networkfence(run_pass)
    assert fence_of(cluster)["spec"]["fenceState"] == "Fenced" and result.code == EXIT_OK and untouched(cluster)
