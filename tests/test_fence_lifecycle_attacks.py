"""Attacks on issue 27 items 1-2 (NetworkFence writes preconditioned; a fence lifted only for its machine), each
a real pass over HTTP against the fixture API server. Each test here is a defect an attack found, or a case
that held and is kept because nothing else covers it."""

from __future__ import annotations

import ipaddress

import pytest
from test_fence_identity import back, fenced, writes
from test_fencing import fence_of, networkfence, set_result, untouched

from rwo_failover.model import OUT_OF_SERVICE_KEY, Machine
from rwo_failover.model.names import FENCE_ADDRESSES_ANNOTATION, FENCE_NODE_UID_ANNOTATION
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import ANNOTATIONS_LIMIT, Fault


@pytest.fixture
def cluster(api):
    fc.outage(api)  # w0..w2 live; "dead" down 600 s with db-0 stuck and its RWO volume attached
    return api


def unfenced_and_answered(api, run_pass) -> None:
    """Our fence, made for "dead", lifted for it on recovery (Unfenced, answered Succeeded): only the delete
    is left."""
    fenced(api, run_pass)
    back(api)
    networkfence(run_pass)
    assert fence_of(api)["spec"]["fenceState"] == "Unfenced"
    set_result(api, "Succeeded")


def test_a_fence_already_unfenced_is_deleted_even_when_another_machine_registered_since(cluster, run_pass):
    """docs/fencing.md's lifecycle holds a fence only while it is Fenced (Fenced --> Held). Once it is Unfenced
    and answered, it fences nothing: deleting it lifts nothing. If the Node object is replaced between the
    unfencing's answer and the delete, the fence was held for ever, with a FenceLeftInPlace Warning and
    alert telling a human that "the fenced machine may still run", which is false. The human is sent to check
    a machine that is not fenced."""
    unfenced_and_answered(cluster, run_pass)
    cluster.delete_object("nodes", "dead")
    new = fc.node("dead", ready="True", since=300)  # a new Node object (another uid), no taint
    new["status"]["addresses"][0]["address"] = "10.9.9.9"
    cluster.add(new)
    cluster.add(fc.lease("dead", 2))

    networkfence(run_pass)

    assert fence_of(cluster) is None, "an Unfenced, answered fence of ours is deleted: it fences nothing"
    assert not [e for e in cluster.objects("events") if e["reason"] == "FenceLeftInPlace"]


def test_a_fence_whose_address_record_was_edited_into_junk_is_held_not_lifted(cluster, run_pass):
    """An admin or a tool edits our record into junk (not addresses, empty entries, a long tail). It reads
    back, compares unequal, and the fence is left in place; nothing is patched."""
    fenced(cluster, run_pass)
    fence = fence_of(cluster)
    fence["metadata"]["annotations"][FENCE_ADDRESSES_ANNOTATION] = "not-an-ip,,," + "x" * 100
    cluster.add(fence)
    cluster.requests.clear()
    back(cluster)

    networkfence(run_pass)

    assert fence_of(cluster)["spec"]["fenceState"] == "Fenced" and not writes(cluster, "patch")
    [event] = [e for e in cluster.objects("events") if e["reason"] == "FenceLeftInPlace"]
    assert "made for not-an-ip" in event["message"] and len(event["message"]) < 1024


def test_a_node_re_registered_between_the_plan_and_the_unfence_is_not_unfenced(cluster, run_pass):
    """Stale view: the plan judged the same machine back (in continuous mode, from the watch cache); before
    the act's re-read, the Node object is replaced by another machine's. The live re-read judges the machine
    rule again: nothing is patched, and the old machine's fence stays."""
    fenced(cluster, run_pass)
    back(cluster)
    cluster.requests.clear()
    listed = []

    def replace_node(req):
        if req.verb == "list" and req.resource == "networkfences":
            listed.append(req)
        elif req.verb == "get" and req.resource == "nodes" and listed and len(listed) < 99:
            listed.extend([None] * 99)  # once
            new = fc.node("dead", ready="True", since=300)  # a new Node object (another uid), no taint
            cluster.delete_object("nodes", "dead")
            cluster.add(new)
        return None
    cluster.hooks.append(replace_node)

    result = networkfence(run_pass)

    assert len(listed) > 1, "the hook fired"
    assert fence_of(cluster)["spec"]["fenceState"] == "Fenced" and not writes(cluster, "patch")
    assert any("no longer calls for it" in line.get("message", "") for line in result.logs)


def test_the_recreate_delete_never_deletes_our_newer_fence_from_a_stale_view(cluster, run_pass):
    """Stale view: the plan judged our old Unfenced fence (say, from a watch cache that lags); by the delete,
    that one is gone and a new one of ours is there (another replica's create, under the same name, with
    the same labels and record). Only the uid tells them apart: the delete's precondition fails (409), the
    fresh one is judged (Fenced, no answer yet: pending), and it is never deleted."""
    networkfence(run_pass)
    old = fence_of(cluster)
    old["spec"]["fenceState"] = "Unfenced"
    cluster.add(old)
    set_result(cluster, "Succeeded")
    swapped = []

    def swap(req):
        if req.verb == "delete" and req.resource == "networkfences" and not swapped:
            judged = fence_of(cluster)
            swapped.append(judged["metadata"]["uid"])
            cluster.replace({"apiVersion": judged["apiVersion"], "kind": judged["kind"],
                             "metadata": {"name": "dead", "generation": 1, "labels": judged["metadata"]["labels"],
                                          "annotations": judged["metadata"]["annotations"]},
                             "spec": dict(judged["spec"], fenceState="Fenced")})
        return None
    cluster.hooks.append(swap)

    result = networkfence(run_pass)

    assert fence_of(cluster)["metadata"]["uid"] != swapped[0] and fence_of(cluster)["spec"]["fenceState"] == "Fenced"
    assert [r.status for r in writes(cluster, "delete")] == [409]
    assert result.summary["fencing_pending"] == 1 and untouched(cluster)


def test_a_boot_id_with_a_trailing_newline_is_recorded_by_its_digest():
    """Round trip: docs/fencing.md says a bootID that is not a plain UUID-like value is recorded as its digest.
    Python's `$` also matches before a final newline, so "<uuid>\\n" (a kubelet's status is the node's to
    write) was recorded as written, newline and all."""
    note = Machine.of("uid", "0d6b4c1e-8a3b-4f5e-9b7a-2f1e3d4c5b6a\n", ("10.0.0.7/32",)).boot_id
    assert note.startswith("sha256:") and len(note) == 71


def test_a_refused_fence_of_another_machine_never_tells_a_human_to_just_unfence_it(cluster, run_pass):
    """Identity, failover side: the old machine's fence (ours, Fenced, answered, for its address) is in place
    when the machine now registered under the name, at another address, goes down with work. The fence is
    refused, rightly; but the FencingFailed Warning told a human to "unfence and delete it by hand", which lifts
    the fence on the old machine, which may still run: what FenceLeftInPlace's runbook forbids without a check."""
    networkfence(run_pass)
    fence = fence_of(cluster)
    fence["metadata"]["annotations"].update({FENCE_NODE_UID_ANNOTATION: "00000000-0000-4000-8000-0000000000a1",
                                             FENCE_ADDRESSES_ANNOTATION: "10.9.9.9/32"})
    fence["spec"]["cidrs"] = ["10.9.9.9/32"]
    fence["metadata"]["generation"] += 1
    cluster.add(fence)
    set_result(cluster, "Succeeded")
    cluster.requests.clear()

    networkfence(run_pass)

    assert untouched(cluster) and fence_of(cluster)["spec"]["fenceState"] == "Fenced"
    [event] = [e for e in cluster.objects("events") if e["reason"] == "FencingFailed"]
    assert "another machine" in event["message"] and "is off" in event["message"], event["message"]
    assert "unfence and delete it by hand" not in event["message"]


def test_an_unfencing_that_failed_for_a_machine_replaced_since_is_still_held(cluster, run_pass):
    """The other side of the rule above: Unfenced asked, but the storage answered Failed, so the old machine's
    addresses are still fenced; then another machine registers under the name. That fence still fences: it is
    held, with the Warning, and never deleted."""
    fenced(cluster, run_pass)
    back(cluster)
    networkfence(run_pass)
    set_result(cluster, "Failed", "could not unfence")
    cluster.delete_object("nodes", "dead")
    cluster.add(fc.node("dead", ready="True", since=300))
    cluster.add(fc.lease("dead", 2))

    networkfence(run_pass)

    assert fence_of(cluster) is not None and not writes(cluster, "delete")
    [event] = [e for e in cluster.objects("events") if e["reason"] == "FenceLeftInPlace"]
    assert "another machine" in event["message"]


# The API server refuses any object whose annotations total more than ANNOTATIONS_LIMIT (apimachinery's
# TotalAnnotationSizeLimitB, for custom resources too); spec.cidrs has no such limit below the 1.5 MiB object.
BASE_V6 = int(ipaddress.IPv6Address("fd12:3456:789a:bcde:f012:3456:0:0"))


def test_the_machine_record_fits_the_annotation_limit_whatever_the_node_reports(cluster, run_pass):
    node = cluster.get("nodes", "dead")
    node["status"]["addresses"] = [{"type": "InternalIP", "address": str(ipaddress.IPv6Address(BASE_V6 + i))}
                                   for i in range(7000)]
    cluster.add(node)

    networkfence(run_pass)

    [create] = [r for r in writes(cluster, "create") if r.could_change]
    assert len(create.body["spec"]["cidrs"]) == 7000
    notes = create.body["metadata"]["annotations"]
    assert sum(len(k) + len(v) for k, v in notes.items()) <= ANNOTATIONS_LIMIT
    assert notes[FENCE_ADDRESSES_ANNOTATION].startswith("sha256:")


def many_addresses(count: int = 7000, changed: int = -1) -> list[dict]:
    return [{"type": "InternalIP", "address": str(ipaddress.IPv6Address(BASE_V6 + (i if i != changed else 10**6)))}
            for i in range(count)]


@pytest.mark.parametrize("changed, unfenced", [(-1, True), (4321, False)])
def test_a_machine_recorded_by_its_addresses_digest_is_unfenced_only_at_those_addresses(cluster, run_pass, changed,
                                                                                         unfenced):
    """The record of a node with thousands of addresses is their digest: the same machine back at the same
    addresses is unfenced; one address changed, and the fence stays, as with a plain record."""
    node = cluster.get("nodes", "dead")
    node["status"]["addresses"] = many_addresses()
    cluster.add(node)
    fenced(cluster, run_pass)
    assert fence_of(cluster)["metadata"]["annotations"][FENCE_ADDRESSES_ANNOTATION].startswith("sha256:")
    back(cluster)
    node = cluster.get("nodes", "dead")
    node["status"]["addresses"] = many_addresses(changed=changed)
    cluster.add(node)

    networkfence(run_pass)

    assert (fence_of(cluster)["spec"]["fenceState"] == "Unfenced") == unfenced
    held = [e for e in cluster.objects("events") if e["reason"] == "FenceLeftInPlace"]
    assert (not held) == unfenced and all("addresses" in e["message"] for e in held)


def test_our_delete_whose_answer_was_lost_on_a_fence_held_by_a_finalizer_keeps_our_taint(cluster, run_pass):
    """Lost answers: csi-addons keeps a NetworkFence with a finalizer while it cleans up. Our delete lands
    (deletionTimestamp set, a new resourceVersion), its answer is lost, and the retry's precondition fails
    (409). Judged again, it is being deleted: not counted as unfenced, and our taint stays until it is gone."""
    unfenced_and_answered(cluster, run_pass)
    fence = fence_of(cluster)
    fence["metadata"]["finalizers"] = ["csiaddons.openshift.io/network-fence"]
    cluster.add(fence)
    cluster.inject(Fault("reset", verb="delete", resource="networkfences", first=1))

    result = networkfence(run_pass)

    assert fence_of(cluster)["metadata"].get("deletionTimestamp")
    assert [(r.status, r.fault) for r in writes(cluster, "delete")] == [(200, "reset"), (409, "")]
    assert result.summary["taints_removed"] == 0 and not [e for e in cluster.objects("events")
                                                          if e["reason"] == "NodeUnfenced"]
    networkfence(run_pass)
    assert any(t["key"] == OUT_OF_SERVICE_KEY for t in cluster.get("nodes", "dead")["spec"]["taints"])
    fence = fence_of(cluster)
    fence["metadata"]["finalizers"] = []
    cluster.delete_object("networkfences", "dead")
    cluster.attacher.detach()  # and the attachment freed at the outage is detached: nothing else holds our taint
    networkfence(run_pass)
    assert not any(t["key"] == OUT_OF_SERVICE_KEY for t in cluster.get("nodes", "dead")["spec"]["taints"])
