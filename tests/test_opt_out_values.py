"""The opt-out annotation takes any value but "false" (docs/safety.md, "Opting out"), on the pod or on a claim it
mounts: whole passes over HTTP, each asserting what the pass must do (exit code, skip reason, what it deleted),
not only what it must not. Issue 37: narrowing the check to `== "true"` failed no test, and pods annotated
"yes", "1" or "" would have been force-deleted and their volumes released."""

from __future__ import annotations

import pytest
from helpers import deletes, oos_taints, patches, pod_names, stuck

from rwo_failover.model import OPT_OUT_ANNOTATION
from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit import fake_cluster as fc

# What people write when they mean "leave it alone", the empty value of `kubectl annotate pod p key=` included.
OPTING_OUT = ["true", "yes", "1", "", "no-thanks"]
# "false" in any case, with any padding, is the only value that does not opt out.
NOT_OPTING_OUT = ["false", "False", " FALSE "]


@pytest.fixture
def cluster(api):
    for i in range(4):
        fc.live_node(api, f"w{i}")
    fc.dead_node(api, "dead")
    stuck(api, "dead", name="free-0")  # not annotated: freed in every case, so each pass provably acted
    return api


def annotated(api, on: str, value: str) -> dict:
    """db-0, stuck on the dead node with an attached RWO claim; the pod or its claim carries the opt-out."""
    notes = {OPT_OUT_ANNOTATION: value}
    fc.add_volume(api, "data-db-0", attached_to="dead", annotations=notes if on == "claim" else None)
    return api.add(fc.pod("db-0", "dead", claims=["data-db-0"], terminating=True,
                          annotations=notes if on == "pod" else None))


def attachment_of(api, claim: str) -> list[str]:
    """The claim's attachments not deleted: a deleted one stays, marked, until its CSI attacher has detached it."""
    return [va["metadata"]["name"] for va in api.objects("volumeattachments")
            if va["spec"]["source"]["persistentVolumeName"] == f"pv-default-{claim}"
            and not va["metadata"].get("deletionTimestamp")]


@pytest.mark.parametrize("on, reason", [
    ("pod", "pod is opted out (annotated rwo-failover.io/opt-out)"),
    ("claim", "PVC default/data-db-0 is annotated rwo-failover.io/opt-out"),
])
@pytest.mark.parametrize("value", OPTING_OUT)
def test_any_value_but_false_protects_the_pod_and_its_volume(cluster, run_pass, on, value, reason):
    annotated(cluster, on, value)
    kept_attachment = attachment_of(cluster, "data-db-0")

    result = run_pass()

    assert result.code == EXIT_OK
    skips = {line["object"]: line["reason"] for line in result.lines("skipped") if line["kind"] == "pod"}
    assert skips == {"default/db-0": reason}
    # The protected pod holds an exclusive volume: no out-of-service taint, which would evict it; the node's
    # skip line names it.
    assert patches(cluster) == [] and oos_taints(cluster, "dead") == []
    [node_skip] = [line for line in result.lines("skipped") if line["kind"] == "node"]
    assert node_skip["object"] == "dead" and "db-0" in node_skip["reason"]
    # The unprotected pod on the same node is freed by the direct path; the protected one, and its attachment,
    # stay.
    assert [r.name for r in deletes(cluster, "pods")] == ["free-0"] and pod_names(cluster) == {"db-0"}
    assert attachment_of(cluster, "data-db-0") == kept_attachment != []
    assert attachment_of(cluster, "data-free-0") == []
    assert result.summary["pods_deleted"] == 1 and result.summary["attachments_deleted"] == 1


@pytest.mark.parametrize("on", ["pod", "claim"])
@pytest.mark.parametrize("value", NOT_OPTING_OUT)
def test_false_opts_nothing_out(cluster, run_pass, on, value):
    pod = annotated(cluster, on, value)

    result = run_pass()

    assert result.code == EXIT_OK
    assert not [line for line in result.lines("skipped") if line["object"] in ("default/db-0", "dead")]
    db = [r for r in deletes(cluster, "pods") if r.name == "db-0"]
    assert [r.body["preconditions"] for r in db] == [{"uid": pod["metadata"]["uid"]}]
    assert pod_names(cluster) == set() and attachment_of(cluster, "data-db-0") == []
    assert len(oos_taints(cluster, "dead")) == 1
    assert {e["involvedObject"]["name"] for e in cluster.objects("events")
            if e["reason"] == "ForceDeletedFromDeadNode"} == {"db-0", "free-0"}
