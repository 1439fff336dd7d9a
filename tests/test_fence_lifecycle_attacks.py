"""Attacks on issue 27 items 1-2 (NetworkFence writes preconditioned; a fence lifted only for its machine), each
a real pass over HTTP against the fixture API server. Each test here is a defect an attack found, or a case
that held and is kept because nothing else covers it."""

from __future__ import annotations

import pytest

from rwo_failover.model.names import FENCE_ADDRESSES_ANNOTATION
from rwo_testkit import fake_cluster as fc

from test_fence_identity import back, fenced, writes
from test_fencing import fence_of, networkfence, set_result


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
