"""Issue 27, items 1 and 2: every NetworkFence write is preconditioned on the object the pass judged (and a 409
is judged again from a fresh read, never retried blindly), and a fence is lifted only for the machine it was
made for. Over HTTP, against the fixture API server, which answers 409 on a stale resourceVersion or uid as
the real one does.
"""

from __future__ import annotations

import pytest
from test_fencing import DEAD_CIDR, fence_of, networkfence, set_result, untouched

from rwo_failover.model import OUT_OF_SERVICE_KEY, Fence
from rwo_failover.model.names import FENCE_ADDRESSES_ANNOTATION, FENCE_BOOT_ID_ANNOTATION, FENCE_NODE_UID_ANNOTATION
from rwo_failover.planner.types import Plan
from rwo_failover.run.exitcodes import EXIT_FAILED, EXIT_OK
from rwo_failover.run.metrics import Metrics
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import Fault


@pytest.fixture
def cluster(api):
    fc.outage(api)  # w0..w2 live; "dead" down 600 s with db-0 stuck and its RWO volume attached
    return api


def fenced(api, run_pass) -> dict:
    """Our fence for "dead", created by a pass and answered Succeeded: the failover ran."""
    networkfence(run_pass)
    set_result(api, "Succeeded")
    networkfence(run_pass)
    return fence_of(api)


def writes(api, verb: str) -> list:
    return [r for r in api.requests if r.resource == "networkfences" and r.verb == verb]


def admin_sets(api, **spec) -> None:
    """A human's edit of the fence's spec: as on the real server, a new resourceVersion and generation."""
    fence = fence_of(api)
    fence["spec"].update(spec)
    fence["metadata"]["generation"] += 1
    api.add(fence)


def back(api, uid: str = "", address: str = "", reboot: bool = True) -> None:
    """The node Ready again for 300 s with a fresh Lease, our taint still on it: by default the same Node object
    (its uid kept), rebooted (another bootID); with `uid`, a new machine registered under the name; with `address`,
    another InternalIP; `reboot=False`: the same boot as when it was fenced (its network came back)."""
    node = api.get("nodes", "dead")
    added_at = fc.stamp(400)  # our taint went on 400 s ago: the node cannot have been Ready since before that
    new = fc.node("dead", ready="True", since=300, taints=[fc.our_taint(added_at)])
    if reboot:
        fc.rebooted(new)
    new["metadata"]["uid"] = uid or node["metadata"]["uid"]
    # Our taint's record names the machine it was added for, the old Node object, before a reboot (issue 27).
    new = fc.mark_ours(api, new, added_at, uid=node["metadata"]["uid"])
    if address:
        new["status"]["addresses"][0]["address"] = address
    api.add(new)
    api.add(fc.lease("dead", 2))


# --- item 1: preconditions, and a 409 judged again ------------------------------------------------------------

def unfenced_and_down_again(api, run_pass) -> dict:
    """Our fence Unfenced and answered (an earlier recovery) while the node is down, with work: the plan
    recreates it."""
    networkfence(run_pass)
    fence = fence_of(api)
    fence["spec"]["fenceState"] = "Unfenced"
    api.add(fence)
    set_result(api, "Succeeded")
    return fence_of(api)


def test_the_recreate_delete_is_preconditioned_on_the_fence_the_pass_judged(cluster, run_pass):
    judged = unfenced_and_down_again(cluster, run_pass)
    networkfence(run_pass)
    [delete] = writes(cluster, "delete")[-1:]
    assert delete.body["preconditions"] == {"uid": judged["metadata"]["uid"],
                                            "resourceVersion": judged["metadata"]["resourceVersion"]}


def test_a_fence_set_back_to_fenced_after_the_plan_is_not_deleted(cluster, run_pass):
    """The issue's case: between the plan and the delete a human sets the fence back to Fenced. The delete's
    precondition fails (409); the fresh object is judged again (Fenced, no answer for its new spec yet: pending),
    and nothing is deleted, so csi-addons never unfences the node."""
    unfenced_and_down_again(cluster, run_pass)

    def refence(req):
        if req.verb == "delete" and req.resource == "networkfences" and fence_of(cluster)["spec"]["fenceState"] \
                == "Unfenced":
            admin_sets(cluster, fenceState="Fenced")
        return None
    cluster.hooks.append(refence)
    before = len(cluster.requests)

    result = networkfence(run_pass)

    assert fence_of(cluster)["spec"]["fenceState"] == "Fenced", "the fence a human set back must stay"
    assert [r.status for r in writes(cluster, "delete") if cluster.requests.index(r) >= before] == [409]
    assert result.code == EXIT_OK and result.summary["fencing_pending"] == 1 and untouched(cluster)


def test_another_fence_under_the_name_after_the_plan_is_not_deleted(cluster, run_pass):
    """Between the plan and the delete the fence is replaced by someone else's under the same name: 409 on the
    uid, the fresh read says it is not ours, and it is neither deleted nor trusted."""
    unfenced_and_down_again(cluster, run_pass)

    def replace(req):
        if req.verb == "delete" and req.resource == "networkfences" and fence_of(cluster)["metadata"].get("labels"):
            cluster.replace({"apiVersion": "csiaddons.openshift.io/v1alpha1", "kind": "NetworkFence",
                             "metadata": {"name": "dead", "generation": 1},
                             "spec": {"fenceState": "Fenced", "cidrs": [DEAD_CIDR]}})
        return None
    cluster.hooks.append(replace)

    result = networkfence(run_pass)

    assert fence_of(cluster) is not None and not fence_of(cluster)["metadata"].get("labels")
    assert [r.status for r in writes(cluster, "delete")][-1:] == [409]
    assert result.code == EXIT_FAILED and untouched(cluster)


def test_a_harmless_change_before_the_recreate_is_judged_again_and_the_delete_goes_ahead(cluster, run_pass):
    """A 409 is not a failure to give up on: re-read, judged again (still ours, still Unfenced), and deleted
    with the fresh object's preconditions."""
    unfenced_and_down_again(cluster, run_pass)
    noted = []

    def annotate(req):
        if req.verb == "delete" and req.resource == "networkfences" and not noted:
            fence = fence_of(cluster)
            fence["metadata"].setdefault("annotations", {})["example.com/note"] = "seen"
            noted.append(cluster.add(fence)["metadata"]["resourceVersion"])
        return None
    cluster.hooks.append(annotate)

    networkfence(run_pass)

    assert fence_of(cluster) is None, "deleted; the next pass creates a new one"
    statuses = [(r.status, r.body["preconditions"]["resourceVersion"]) for r in writes(cluster, "delete")]
    assert statuses[-2][0] == 409 and statuses[-1] == (200, noted[0])


def test_the_unfence_patch_is_judged_again_after_a_409(cluster, run_pass):
    """The unfencing patch carries the resourceVersion it judged; a change in between (a human's label) makes
    it 409, and the fresh read, judged again, is patched with its own resourceVersion."""
    fenced(cluster, run_pass)
    back(cluster)
    noted = []

    def label(req):
        if req.verb == "patch" and req.resource == "networkfences" and not noted:
            fence = fence_of(cluster)
            fence["metadata"]["labels"]["example.com/team"] = "storage"
            noted.append(cluster.add(fence)["metadata"]["resourceVersion"])
        return None
    cluster.hooks.append(label)

    networkfence(run_pass)

    patches = [(r.status, r.body["metadata"]["resourceVersion"]) for r in writes(cluster, "patch")]
    assert patches[0][0] == 409 and patches[1] == (200, noted[0])
    assert fence_of(cluster)["spec"]["fenceState"] == "Unfenced"


def test_our_own_unfence_patch_whose_answer_was_lost_is_not_sent_again(cluster, run_pass):
    """The patch lands, its answer is lost, and the retry meets its own new resourceVersion (409). Read and
    judged again: Unfenced, asked, no answer yet: nothing more is sent."""
    fenced(cluster, run_pass)
    back(cluster)
    cluster.inject(Fault("reset", verb="patch", resource="networkfences", first=1))

    result = networkfence(run_pass)

    assert [(r.status, r.fault) for r in writes(cluster, "patch")] == [(200, "reset"), (409, "")]
    assert fence_of(cluster)["spec"]["fenceState"] == "Unfenced" and result.code == EXIT_OK


def test_a_fence_set_back_to_fenced_before_our_delete_is_not_deleted(cluster, run_pass):
    """Unfenced and answered, about to be deleted: a human sets it back to Fenced. The delete's precondition
    fails, and the fresh read no longer calls for a delete."""
    fenced(cluster, run_pass)
    back(cluster)
    networkfence(run_pass)
    set_result(cluster, "Succeeded")

    def refence(req):
        if req.verb == "delete" and req.resource == "networkfences" and fence_of(cluster)["spec"]["fenceState"] \
                == "Unfenced":
            admin_sets(cluster, fenceState="Fenced")
        return None
    cluster.hooks.append(refence)

    networkfence(run_pass)

    assert fence_of(cluster)["spec"]["fenceState"] == "Fenced"
    assert [r.status for r in writes(cluster, "delete")] == [409]


def test_our_own_create_whose_answer_was_lost_is_judged_from_its_409_and_awaited(cluster, run_pass):
    """The create lands but its answer is lost; the retry gets 409 AlreadyExists. Read and judged: ours, for
    this machine, not answered yet, so the pass waits for its answer as after any create, and acts on it."""
    def lose_the_answer(req):  # armed once the start-up check's dry-run create has passed
        if req.verb == "list" and req.resource == "networkfences" and not cluster.faults:
            cluster.inject(Fault("reset", verb="create", resource="networkfences", first=1))
        return None
    cluster.hooks.append(lose_the_answer)

    reads = []

    def answers(req):  # the controller answers after the pass has read the fence twice (judged, then waited)
        fence = cluster.get("networkfences", "dead")
        if req.verb == "get" and req.resource == "networkfences" and fence and "status" not in fence:
            reads.append(req)
            if len(reads) == 2:
                set_result(cluster, "Succeeded")
        return None
    cluster.hooks.append(answers)

    result = networkfence(run_pass)

    assert [(r.status, r.fault) for r in writes(cluster, "create") if r.could_change] == [(201, "reset"),
                                                                                          (409, "")]
    assert result.code == EXIT_OK and cluster.objects("pods") == [], "fenced, then freed in the same pass"
    assert not [e for e in cluster.objects("events") if e["reason"] == "FencingFailed"]


# --- item 2: a fence remembers its machine, and undo lifts only that ------------------------------------------

def test_a_fence_records_the_machine_it_was_made_for(cluster, run_pass):
    node = cluster.get("nodes", "dead")
    networkfence(run_pass)
    notes = fence_of(cluster)["metadata"]["annotations"]
    assert notes[FENCE_NODE_UID_ANNOTATION] == node["metadata"]["uid"]
    assert notes[FENCE_BOOT_ID_ANNOTATION] == node["status"]["nodeInfo"]["bootID"]
    assert notes[FENCE_ADDRESSES_ANNOTATION] == DEAD_CIDR


def test_a_boot_id_a_kubelet_wrote_oddly_is_recorded_by_its_digest_and_reads_back(cluster, run_pass):
    """The bootID is the kubelet's to write: a long or odd one must neither make our fence too big to create
    nor fail to read back (attack class: round trips)."""
    node = cluster.get("nodes", "dead")
    node["status"]["nodeInfo"]["bootID"] = "boot id, " * 20000
    cluster.add(node)
    networkfence(run_pass)
    raw = fence_of(cluster)
    note = raw["metadata"]["annotations"][FENCE_BOOT_ID_ANNOTATION]
    assert note.startswith("sha256:") and len(note) == 71
    assert Fence.from_json(raw).machine.boot_id == note


def left_in_place(api, result, reason: str) -> None:
    assert fence_of(api)["spec"]["fenceState"] == "Fenced", "the old machine's fence must stay"
    assert not writes(api, "patch") and not writes(api, "delete")
    [event] = [e for e in api.objects("events") if e["reason"] == "FenceLeftInPlace"]
    assert event["type"] == "Warning" and event["involvedObject"]["uid"] == api.get("nodes", "dead")["metadata"]["uid"]
    assert reason in event["message"]
    [skip] = [line for line in result.logs if line.get("kind") == "networkfence" and reason in line.get("reason", "")]
    assert skip


def test_a_node_re_registered_under_the_name_does_not_lift_the_old_machines_fence(cluster, run_pass):
    """The issue's case: the Node object deleted, a new machine registered under the name with another address
    and uid, Ready for RECOVERY_SECONDS. The old machine, which may still run, stays fenced."""
    fenced(cluster, run_pass)
    cluster.requests.clear()
    back(cluster, uid="00000000-0000-4000-8000-000000000001", address="10.9.9.9")

    result = networkfence(run_pass)

    left_in_place(cluster, result, "another machine")
    assert result.code == EXIT_OK


def test_a_node_back_without_rebooting_keeps_its_fence_as_it_keeps_our_taint(cluster, run_pass):
    """Hole 1 of issue 35: the fence recorded the machine's bootID, but undo compared only the Node uid and the
    addresses, so a node back without a reboot had its fence set Unfenced (and deleted the pass after), while our
    taint stayed for the same reason. One undo rule now (planner/undo.py): the fence stays, one Warning says why,
    and the metric counts it."""
    fenced(cluster, run_pass)
    cluster.requests.clear()
    back(cluster, reboot=False)

    first, second = networkfence(run_pass), networkfence(run_pass)

    assert first.code == second.code == EXIT_OK
    left_in_place(cluster, first, "without rebooting")
    assert not writes(cluster, "patch") and not writes(cluster, "delete"), "nor on the pass after"
    assert [s for s in first.lines("skipped") if s["object"] == "dead" and "without rebooting" in s["reason"]]
    assert len(cluster.get("nodes", "dead")["spec"]["taints"]) == 1, "our taint stays too, behind the fence"
    assert [s for s in first.lines("skipped") if s["object"] == "dead" and "until the node is unfenced" in s["reason"]]


def test_a_node_back_after_a_reboot_is_unfenced(cluster, run_pass):
    """The same, rebooted (another bootID): unfenced, and the pass after deletes the fence."""
    fenced(cluster, run_pass)
    back(cluster)
    asked = networkfence(run_pass)
    assert asked.code == EXIT_OK and fence_of(cluster)["spec"]["fenceState"] == "Unfenced"


def test_a_fresh_node_object_without_our_taint_does_not_lift_the_old_machines_fence(cluster, run_pass):
    """As a new machine registers: a new Node object with no taint at all, Ready for longer than
    RECOVERY_SECONDS, at another address. Nothing else keeps the old fence: the machine rule does."""
    fenced(cluster, run_pass)
    cluster.requests.clear()
    cluster.delete_object("nodes", "dead")
    new = fc.node("dead", ready="True", since=300)
    new["status"]["addresses"][0]["address"] = "10.9.9.9"
    cluster.add(new)
    cluster.add(fc.lease("dead", 2))

    result = networkfence(run_pass)

    left_in_place(cluster, result, "another machine")


def test_a_node_whose_addresses_changed_does_not_lift_the_fence(cluster, run_pass):
    """Same Node object, another address: unfencing would lift the fence on an address the node no longer has."""
    fenced(cluster, run_pass)
    cluster.requests.clear()
    back(cluster, address="10.9.9.9")

    result = networkfence(run_pass)

    left_in_place(cluster, result, "addresses")


def test_a_fence_without_our_record_is_never_unfenced(cluster, run_pass):
    """Labelled ours, but without the record of the machine (made by hand, or by a version that kept none):
    never lifted by us."""
    fenced(cluster, run_pass)
    fence = fence_of(cluster)
    for key in (FENCE_NODE_UID_ANNOTATION, FENCE_BOOT_ID_ANNOTATION, FENCE_ADDRESSES_ANNOTATION):
        del fence["metadata"]["annotations"][key]
    cluster.add(fence)
    cluster.requests.clear()
    back(cluster)

    result = networkfence(run_pass)

    left_in_place(cluster, result, "no record")


def test_the_same_machine_back_for_good_is_unfenced(cluster, run_pass):
    fenced(cluster, run_pass)
    back(cluster)
    networkfence(run_pass)
    assert fence_of(cluster)["spec"]["fenceState"] == "Unfenced"
    assert not [e for e in cluster.objects("events") if e["reason"] == "FenceLeftInPlace"]


def test_fences_left_in_place_are_a_gauge_by_cause_with_no_node_label():
    metrics = Metrics()
    held = (("dead", "other-machine", "why"), ("w9", "other-machine", "why"), ("w8", "no-record", "why"))
    metrics.record_pass(Plan((), (), (), fences_held=held), None, EXIT_OK, seconds=1.0)
    [family] = [f for f in metrics.registry.collect() if f.name == "rwo_failover_fences_left_in_place"]
    assert {s.labels["cause"]: s.value for s in family.samples} == {"other-machine": 2, "addresses": 0,
                                                                    "no-record": 1, "not-rebooted": 0}
    metrics.record_pass(Plan((), (), ()), None, EXIT_OK, seconds=1.0)
    [family] = [f for f in metrics.registry.collect() if f.name == "rwo_failover_fences_left_in_place"]
    assert {s.value for s in family.samples} == {0}, "a fence lifted by hand is gone from the next pass's figure"


# --- two outages through one standing fence ------------------------------------------------------------------

def _as_now(api, *, ready: str, since: float, taints: list, lease_ago: float) -> None:
    """The node "dead" as it reports itself now: its uid and bootID kept, `ready` for `since` seconds."""
    current = api.get("nodes", "dead")
    node = fc.node("dead", ready=ready, since=since, taints=taints)
    node["metadata"]["uid"] = current["metadata"]["uid"]
    api.add(fc.rebooted(node, current["status"]["nodeInfo"]["bootID"]))
    api.add(fc.lease("dead", lease_ago))


def test_a_fence_stays_until_the_machine_reboots_after_the_last_release_through_it(cluster, run_pass):
    """The node comes back rebooted, dies again before its fence is lifted, and a pod that ran there meanwhile is
    released through the standing fence. Back from that second outage without a reboot, the fence stays: the
    machine recorded on it is the machine at the last release."""
    fenced(cluster, run_pass)
    back(cluster)  # rebooted (a new bootID); no pass runs before it dies again
    ours = [t for t in cluster.get("nodes", "dead")["spec"]["taints"] if t["key"] == OUT_OF_SERVICE_KEY]
    fc.add_volume(cluster, "data-db-1", attached_to="dead")
    cluster.add(fc.pod("db-1", "dead", claims=["data-db-1"], terminating=True))
    _as_now(cluster, ready="Unknown", since=600, taints=[fc.SHUTDOWN, fc.UNREACHABLE, *ours], lease_ago=640)

    second = networkfence(run_pass)

    assert second.summary["pods_deleted"] == 1 and second.summary["attachments_deleted"] == 1
    assert fence_of(cluster)["metadata"]["annotations"][FENCE_BOOT_ID_ANNOTATION] == \
        cluster.get("nodes", "dead")["status"]["nodeInfo"]["bootID"], "the machine at the release"
    _as_now(cluster, ready="True", since=300, taints=ours, lease_ago=2)  # back without a reboot
    cluster.requests.clear()

    result = networkfence(run_pass)

    assert result.code == EXIT_OK and fence_of(cluster)["spec"]["fenceState"] == "Fenced"
    assert not writes(cluster, "delete") and not [r for r in writes(cluster, "patch") if "Unfenced" in str(r.body)]
    left_in_place(cluster, result, "without rebooting")


def test_a_release_kubernetes_makes_under_our_standing_fence_is_one_undo_waits_for_a_reboot_after(cluster,
                                                                                                 run_pass):
    """As above, but the second release is Kubernetes' own (PodGC and the attacher, through our standing taint):
    our pass has nothing left to release, and the fence must still name the machine as it is now."""
    fenced(cluster, run_pass)
    back(cluster)
    ours = [t for t in cluster.get("nodes", "dead")["spec"]["taints"] if t["key"] == OUT_OF_SERVICE_KEY]
    _as_now(cluster, ready="Unknown", since=600, taints=[fc.SHUTDOWN, fc.UNREACHABLE, *ours], lease_ago=640)

    second = networkfence(run_pass)

    assert second.code == EXIT_OK and second.summary["pods_deleted"] == 0
    assert fence_of(cluster)["metadata"]["annotations"][FENCE_BOOT_ID_ANNOTATION] == \
        cluster.get("nodes", "dead")["status"]["nodeInfo"]["bootID"], "the machine as it is now it is down again"
    _as_now(cluster, ready="True", since=300, taints=ours, lease_ago=2)
    cluster.requests.clear()

    result = networkfence(run_pass)

    assert result.code == EXIT_OK and fence_of(cluster)["spec"]["fenceState"] == "Fenced"
    assert not writes(cluster, "delete") and not [r for r in writes(cluster, "patch") if "Unfenced" in str(r.body)]


def test_a_node_booting_after_the_outage_leaves_the_fence_s_machine_as_recorded(cluster, run_pass):
    """Ready=False with a new bootID is a kubelet starting after the power cycle, not a new outage: the fence keeps
    the machine it was made for, so undo can lift it once the node is Ready (fences_now)."""
    fenced(cluster, run_pass)
    recorded = fence_of(cluster)["metadata"]["annotations"][FENCE_BOOT_ID_ANNOTATION]
    ours = [t for t in cluster.get("nodes", "dead")["spec"]["taints"] if t["key"] == OUT_OF_SERVICE_KEY]
    cluster.add(fc.rebooted(cluster.get("nodes", "dead")))
    _as_now(cluster, ready="False", since=5, taints=ours, lease_ago=1)
    cluster.requests.clear()

    assert networkfence(run_pass).code in (EXIT_OK, EXIT_FAILED)

    assert fence_of(cluster)["metadata"]["annotations"][FENCE_BOOT_ID_ANNOTATION] == recorded
    assert not writes(cluster, "patch")
