"""Fencing before the volume moves (issue 14): csi-addons NetworkFence and the fence webhook, over HTTP.

The adversarial rule runs through all of it: with fencing enabled and not confirmed, no pod, attachment
or taint is touched.
"""

from __future__ import annotations

import json
import time

import pytest
from conftest import plant
from helpers import detached, stuck

from rwo_failover.model import OUT_OF_SERVICE_KEY
from rwo_failover.run.exitcodes import EXIT_FAILED, EXIT_OK
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fence_server import FenceServer, Recorder

FENCE_CLASS = "ceph-rbd-fence"
DEAD_CIDR = f"{fc.internal_ip('dead')}/32"


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
    assert fence["spec"] == {"fenceState": "Fenced", "networkFenceClassName": FENCE_CLASS, "cidrs": [DEAD_CIDR]}
    assert fence["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "rwo-failover"}
    assert first.code == EXIT_OK and first.summary["fencing_pending"] == 1 and untouched(cluster)

    pending = networkfence(run_pass)
    assert pending.code == EXIT_OK and untouched(cluster), "pending across passes: still nothing touched"
    creates = [r for r in cluster.requests if r.verb == "create" and r.resource == "networkfences" and r.could_change]
    assert len(creates) == 1, "never a second object for the same node"

    set_result(cluster, "Succeeded")
    done = networkfence(run_pass)
    assert done.code == EXIT_OK and cluster.objects("pods") == [] and detached(cluster) == []
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
                 "metadata": {"name": "dead"}, "spec": {"fenceState": "Fenced", "cidrs": [DEAD_CIDR]},
                 "status": {"result": "Succeeded"}})
    result = networkfence(run_pass)
    assert result.code == EXIT_FAILED and untouched(cluster)
    assert not [r for r in cluster.requests if r.resource == "networkfences" and r.verb != "list" and r.could_change]


def test_an_ipv6_address_is_fenced_as_a_128(cluster, run_pass):
    node = cluster.get("nodes", "dead")
    node["status"]["addresses"] = [{"type": "InternalIP", "address": "fd00::7"},
                                   {"type": "InternalIP", "address": "10.0.0.7"}]
    cluster.add(node)
    networkfence(run_pass)
    assert fence_of(cluster)["spec"]["cidrs"] == ["10.0.0.7/32", "fd00::7/128"]


def test_unfence_on_recovery_before_our_taint_comes_off(cluster, run_pass):
    networkfence(run_pass)
    set_result(cluster, "Succeeded")
    networkfence(run_pass)
    # Back for 300 s, after our taint went on 400 s ago (the node cannot have been Ready since before that).
    added = fc.stamp(400)
    node = fc.rebooted(fc.node("dead", ready="True", since=300, taints=[fc.our_taint(added)]))
    node["metadata"]["uid"] = cluster.get("nodes", "dead")["metadata"]["uid"]  # the same machine (issue 27)
    node = fc.mark_ours(cluster, node, added)  # our taint's record names that machine, before its reboot
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
    # The attachment deleted at the outage is still being detached (its attacher's finalizer holds it, as on a real
    # server): our taint stays until it is gone, since ceph-csi fences in ControllerUnpublishVolume only while the
    # taint is on.
    kept = networkfence(run_pass)
    assert kept.summary["taints_removed"] == 0
    assert [line for line in kept.lines("skipped") if "stays while VolumeAttachments are on the node" in line["reason"]]
    assert cluster.attacher.detach() and cluster.attacher.unpublished[-1][2], "detached with the taint on"
    final = networkfence(run_pass)
    assert final.summary["taints_removed"] == 1
    assert not [t for t in cluster.get("nodes", "dead")["spec"]["taints"] if t["key"] == OUT_OF_SERVICE_KEY]


def test_once_fenced_a_node_is_acted_on_after_its_lease_duration_not_min_not_ready(api, run_pass):
    for i in range(3):
        fc.live_node(api, f"w{i}")
    fc.dead_node(api, "dead", down_for=45)  # NotReady 45 s, Lease 85 s old: under MIN (60), over the lease (40)
    # A one-shot run must be able to wait 60 s of its own sighting (issue 35): PASS_TIMEOUT_SECONDS leaves it room.
    assert_fencing_turns_not_yet_into_failover(api, run_pass, MIN_NOT_READY_SECONDS="60", PASS_TIMEOUT_SECONDS="102")


def assert_fencing_turns_not_yet_into_failover(api, run_pass, **env: str) -> None:
    """"dead", not yet down without fencing, is failed over once its NetworkFence answers Succeeded."""
    stuck(api, "dead")
    assert run_pass(**env).summary["not_yet"] == 1, "without fencing: not yet"
    networkfence(run_pass, **env)
    set_result(api, "Succeeded")
    assert networkfence(run_pass, **env).code == EXIT_OK and api.objects("pods") == []


# --- the fence webhook --------------------------------------------------------------------------------------

@pytest.fixture
def fencer():
    with FenceServer() as server:
        yield server


def webhook(run_pass, fencer, tmp_path, **env):
    token = tmp_path / "token"
    token.write_text(plant("s3cret-fence-token") + "\n")
    return run_pass(FENCING="webhook", FENCE_WEBHOOK_URL=fencer.url, FENCE_WEBHOOK_TOKEN_FILE=str(token),
                    FENCE_WEBHOOK_CA_FILE=fencer.ca_file, **env)


def test_the_webhook_is_asked_with_the_node_and_a_yes_releases_it_in_the_same_pass(cluster, run_pass, fencer,
                                                                                    tmp_path):
    result = webhook(run_pass, fencer, tmp_path)

    assert result.code == EXIT_OK and cluster.objects("pods") == [] and detached(cluster) == []
    [request] = fencer.requests
    assert request["headers"]["Authorization"] == "Bearer s3cret-fence-token"
    node = cluster.get("nodes", "dead")
    assert request["body"] == {"node": "dead", "uid": node["metadata"]["uid"], "providerID": node["spec"]["providerID"],
                               "addresses": [fc.internal_ip("dead")],
                               "taint": "node.cloudprovider.kubernetes.io/shutdown",
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
    patch theirs nor act. The 409 is judged at once from a fresh read (issue 27): not ours, so refused in this
    pass, with the Warning."""
    def racing_create(req):
        if req.verb == "create" and req.resource == "networkfences" and req.could_change and \
                not cluster.get("networkfences", "dead"):
            cluster.add({"apiVersion": "csiaddons.openshift.io/v1alpha1", "kind": "NetworkFence",
                         "metadata": {"name": "dead"}, "spec": {"fenceState": "Fenced", "cidrs": [DEAD_CIDR]}})
        return None
    cluster.hooks.append(racing_create)

    result = networkfence(run_pass)

    assert result.code == EXIT_FAILED and untouched(cluster)
    assert not [r for r in cluster.requests if r.resource == "networkfences" and r.verb in ("patch", "delete")]
    assert [e for e in cluster.objects("events") if e["reason"] == "FencingFailed"]
    assert networkfence(run_pass).code == EXIT_FAILED, "and so does the next pass"


def test_our_unfenced_fence_is_fenced_again_when_the_node_dies_again(cluster, run_pass):
    """Not by setting it back to Fenced, which would leave the unfencing's Succeeded in place: deleted, then a
    new one, whose only result can be for its one spec."""
    networkfence(run_pass)
    fence = fence_of(cluster)
    fence["spec"]["fenceState"] = "Unfenced"
    cluster.add(fence)
    set_result(cluster, "Succeeded")
    deleted = networkfence(run_pass)
    assert fence_of(cluster) is None and deleted.code == EXIT_OK and untouched(cluster)
    again = networkfence(run_pass)
    assert fence_of(cluster)["spec"]["fenceState"] == "Fenced" and "status" not in fence_of(cluster)
    assert again.code == EXIT_OK and untouched(cluster)
    set_result(cluster, "Succeeded")
    assert networkfence(run_pass).code == EXIT_OK and cluster.objects("pods") == []


# --- issue 18: what a fencer, a proxy or a NetworkFence may say that must not be believed -------------------

def test_a_redirect_is_a_failed_fence_and_the_token_never_follows_it(cluster, run_pass, fencer, tmp_path):
    """Row 3: a 302 from the verified fencer to plain http:// on another port."""
    with Recorder() as elsewhere:
        fencer.answer = (302, {}, {"Location": elsewhere.url})

        result = webhook(run_pass, fencer, tmp_path)

        assert elsewhere.requests == [], "nothing, and so no token, is sent where a redirect points"
    assert result.code == EXIT_FAILED and untouched(cluster)
    [event] = [e for e in cluster.objects("events") if e["reason"] == "FencingFailed"]
    assert "HTTP 302" in event["message"] and "redirect" in event["message"]
    assert len(fencer.requests) == 1 and fencer.requests[0]["method"] == "POST"


@pytest.mark.parametrize("answer, why", [
    ((200, {"fenced": True}), "does not name"),
    ((200, {"fenced": True, "node": "other", "uid": None}), "does not name"),
    ((200, {"fenced": True, "node": "dead", "uid": "someone-else"}), "does not name"),
    ((200, [{"fenced": True}]), "not {\"fenced\": true"),
])
def test_a_yes_that_does_not_name_the_node_asked_about_is_not_believed(cluster, run_pass, fencer, tmp_path,
                                                                        answer, why):
    fencer.answer = answer
    result = webhook(run_pass, fencer, tmp_path)
    assert result.code == EXIT_FAILED and untouched(cluster)
    [event] = [e for e in cluster.objects("events") if e["reason"] == "FencingFailed"]
    assert why in event["message"], event["message"]


def test_a_node_without_an_address_is_never_fenced_nor_released_through_fencing(cluster, run_pass):
    """Row 4: a node without an InternalIP got `cidrs: []` ("for no address") and was released once that
    fence said Succeeded."""
    node = cluster.get("nodes", "dead")
    node["status"]["addresses"] = [{"type": "Hostname", "address": "dead"}]
    cluster.add(node)

    first = networkfence(run_pass)
    assert fence_of(cluster) is None, "no NetworkFence that would fence nothing"
    cluster.add({"apiVersion": "csiaddons.openshift.io/v1alpha1", "kind": "NetworkFence",
                 "metadata": {"name": "dead", "generation": 1,
                              "labels": {"app.kubernetes.io/managed-by": "rwo-failover"}},
                 "spec": {"fenceState": "Fenced", "cidrs": []}})
    set_result(cluster, "Succeeded")
    second = networkfence(run_pass)

    assert (first.code, second.code) == (EXIT_FAILED, EXIT_FAILED) and untouched(cluster)
    [event] = [e for e in cluster.objects("events") if e["reason"] == "FencingFailed"]
    assert "no InternalIP address" in event["message"] and event["count"] == 1, "one Warning says why"


def test_a_succeeded_fence_for_another_address_is_not_trusted(cluster, run_pass):
    """Row 4: a Succeeded fence for the node's old address released a node of the same name now at 10.0.0.99."""
    networkfence(run_pass)
    set_result(cluster, "Succeeded")
    node = cluster.get("nodes", "dead")
    node["status"]["addresses"] = [{"type": "InternalIP", "address": "10.0.0.99"}]
    cluster.add(node)

    result = networkfence(run_pass)

    assert result.code == EXIT_FAILED and untouched(cluster)
    [event] = [e for e in cluster.objects("events") if e["reason"] == "FencingFailed"]
    assert DEAD_CIDR in event["message"] and "10.0.0.99/32" in event["message"]


def test_a_failing_fence_is_one_warning_however_many_passes_see_it(cluster, run_pass):
    """Row 6: FencingFailed was a new Event every pass while a fence kept failing."""
    networkfence(run_pass)
    set_result(cluster, "Failed", "ceph: blocklist add refused")
    for _ in range(3):
        time.sleep(1.05)  # Event names carry the second: passes in the same second would hide a repeat
        assert networkfence(run_pass).code == EXIT_FAILED
    [event] = [e for e in cluster.objects("events") if e["reason"] == "FencingFailed"]
    assert event["count"] == 1


def answer_without_conditions(api, result: str, message: str, node: str = "dead") -> None:
    """An older csi-addons controller: status.result and a message, no conditions, no observedGeneration."""
    fence = fence_of(api, node)
    fence["status"] = {"result": result, "message": message}
    api.add(fence)


def test_an_old_succeeded_never_counts_for_a_new_request_whatever_the_message(cluster, run_pass):
    """Also seen: a controller that writes the same message for fence and unfence made the Succeeded of an
    unfencing count for the fencing asked after it."""
    networkfence(run_pass)
    fence = fence_of(cluster)
    fence["spec"]["fenceState"] = "Unfenced"  # an earlier recovery: unfenced, and answered
    cluster.add(fence)
    answer_without_conditions(cluster, "Succeeded", "operation successful")

    for _ in range(2):  # ask again; the controller has not answered the new request yet
        result = networkfence(run_pass)
        assert result.code == EXIT_OK and untouched(cluster)

    assert result.summary["fencing_pending"] == 1


def back_for_good(api) -> None:
    node = api.get("nodes", "dead")
    [record] = fc.taint_records(api)  # the one our taint's pass wrote
    back = fc.rebooted(fc.node("dead", ready="True", since=300, taints=[fc.our_taint(record["addedAt"])]))
    back["metadata"]["uid"] = node["metadata"]["uid"]
    api.add(back)
    api.add(fc.lease("dead", 2))


def test_unfencing_acts_on_a_live_read_not_on_the_plan(cluster, run_pass):
    """Also seen: Fencer.unfence acted on the plan's snapshot. Here the node dies again after observe read
    it: the live re-read before the unfence sees it, and the fence stays."""
    networkfence(run_pass)
    set_result(cluster, "Succeeded")
    networkfence(run_pass)
    back_for_good(cluster)

    def dies_again(req):
        if req.verb == "list" and req.resource == "volumeattachments":
            down = cluster.get("nodes", "dead")
            down["status"]["conditions"][-1].update(status="Unknown", lastTransitionTime=fc.stamp(0))
            cluster.add(down)
            cluster.add(fc.lease("dead", 600))
        return None
    cluster.hooks.append(dies_again)

    result = networkfence(run_pass)

    assert fence_of(cluster)["spec"]["fenceState"] == "Fenced", "never unfence a node that is not back"
    assert not [r for r in cluster.requests if r.verb == "patch" and r.resource == "networkfences"]
    assert result.code == EXIT_OK


# --- fencing is never slower than not fencing (issue 20) -----------------------------------------------------

def test_a_fence_that_answers_while_the_pass_waits_is_acted_on_in_that_pass(cluster, run_pass):
    """A CronJob pass that creates the fence waits for its answer, a few seconds for csi-addons, instead of
    leaving the failover to the next pass a minute later."""
    reads: list[int] = []

    def controller(req) -> None:  # answers once the fence has been read twice, as if after a second or two
        if req.verb == "get" and req.resource == "networkfences":
            reads.append(1)
            if len(reads) == 2:
                set_result(cluster, "Succeeded")
    cluster.hooks.append(controller)

    result = networkfence(run_pass)

    assert result.code == EXIT_OK and result.summary["fencing_pending"] == 0
    assert cluster.objects("pods") == [] and detached(cluster) == []
    assert 1.0 in result.sleeps, "it waited between reads of the fence"


def test_a_fence_that_never_answers_leaves_a_third_of_the_pass_for_the_rest(cluster, run_pass):
    result = networkfence(run_pass, PASS_TIMEOUT_SECONDS="12")
    reads = [r for r in result.requests if r.verb == "get" and r.resource == "networkfences"]
    assert result.summary["fencing_pending"] == 1 and untouched(cluster)
    assert 0 < len(reads) <= 8, "it stops waiting with a third of the pass deadline left"


def test_once_fenced_a_node_is_down_at_the_controllers_verdict_and_its_leases_duration(api, run_pass):
    """With fencing confirmed before anything is touched, no wait beyond the node lifecycle controller's
    Ready=Unknown and the Lease's own duration is needed: FENCED_MIN_NOT_READY_SECONDS defaults to 0."""
    for i in range(3):
        fc.live_node(api, f"w{i}")
    api.add(fc.node("dead", ready="Unknown", since=2, taints=[fc.SHUTDOWN, fc.UNREACHABLE]))
    api.add(fc.lease("dead", 42))  # renewed 42 s ago, then silent: NotReady 2 s ago after a 40 s grace
    assert_fencing_turns_not_yet_into_failover(api, run_pass)  # without fencing: MIN_NOT_READY_SECONDS=3


# --- Found by the attack on issue 18 --------------------------------------------------------------------------

def test_the_fence_is_judged_again_against_the_nodes_live_address_before_acting(cluster, run_pass):
    """The node's address changes between the plan and the live re-check: the Succeeded fence for the old address
    no longer fences this node, so nothing on it is touched."""
    networkfence(run_pass)
    set_result(cluster, "Succeeded")
    moved = []

    def move_on_recheck(req) -> None:
        if req.verb == "get" and req.resource == "nodes" and req.name == "dead" and not moved:
            node = cluster.get("nodes", "dead")
            node["status"]["addresses"] = [{"type": "InternalIP", "address": "10.9.9.99"}]
            cluster.add(node)
            moved.append(1)
    cluster.hooks.append(move_on_recheck)

    result = networkfence(run_pass)

    assert moved and untouched(cluster) and result.code == EXIT_FAILED


def test_one_address_written_two_ways_is_one_address(cluster, run_pass):
    """fd00::5 and fd00:0:0:0::5 are the same address: another node reporting it in the other spelling makes it
    shared, and fencing it would cut that node off too."""
    for name, spelling in (("dead", "fd00::5"), ("w0", "fd00:0:0:0::5")):
        node = cluster.get("nodes", name)
        node["status"]["addresses"] = [{"type": "InternalIP", "address": spelling}]
        cluster.add(node)

    result = networkfence(run_pass)

    assert fence_of(cluster) is None and untouched(cluster) and result.code == EXIT_FAILED


def test_a_broadcast_address_is_never_fenced(cluster, run_pass):
    node = cluster.get("nodes", "dead")
    node["status"]["addresses"] = [{"type": "InternalIP", "address": "255.255.255.255"}]
    cluster.add(node)

    result = networkfence(run_pass)

    assert fence_of(cluster) is None and untouched(cluster) and result.code == EXIT_FAILED
