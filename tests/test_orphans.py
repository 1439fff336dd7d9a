"""Attachments on a proven-down node that no pod there uses any more (orphans), and what each release says: found by
`make mutants` on planner/attachments.py (issue 37). A released attachment's delete carries its uid, its log line
and its claim's Event name the node, the volume and the claim (by uid); an orphan is released only when its PV
names its claim back, inside the namespace filters, without POD_SELECTOR; each refusal says why."""

from __future__ import annotations

import pytest
from helpers import attached, deletes, stuck

from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit import fake_cluster as fc


@pytest.fixture
def cluster(api):
    for i in range(4):
        fc.live_node(api, f"w{i}")
    fc.dead_node(api, "dead")
    return api


def released_fields(result, api, va: dict, pvc: dict) -> None:
    name, uid = va["metadata"]["name"], va["metadata"]["uid"]
    [delete] = [r for r in deletes(api, "volumeattachments") if r.name == name]
    assert delete.body["preconditions"] == {"uid": uid}
    [line] = [line for line in result.lines("deleted VolumeAttachment") if line["volumeattachment"] == name]
    assert (line["node"], line["pv"], line["claim"]) == ("dead", va["spec"]["source"]["persistentVolumeName"],
                                                         f"{pvc['metadata']['namespace']}/{pvc['metadata']['name']}")
    [event] = [e for e in api.objects("events") if e["reason"] == "VolumeReleasedFromDeadNode"
               and e["involvedObject"]["name"] == pvc["metadata"]["name"]]
    assert event["involvedObject"]["uid"] == pvc["metadata"]["uid"] and event["involvedObject"]["kind"] == \
        "PersistentVolumeClaim"
    assert event["message"] == (f"deleted VolumeAttachment {name} of PV {line['pv']} on dead node dead")


def test_an_orphan_is_released_naming_its_node_volume_and_claim(cluster, run_pass):
    pvc, _pv, va = fc.add_volume(cluster, "data-gone-0", attached_to="dead")  # its pod is gone already
    result = run_pass()
    assert result.code == EXIT_OK and attached(cluster) == []
    released_fields(result, cluster, va, pvc)


def test_a_stuck_pod_s_attachment_is_released_naming_its_node_volume_and_claim(cluster, run_pass):
    stuck(cluster, "dead")
    [va] = cluster.objects("volumeattachments")
    pvc = cluster.get("persistentvolumeclaims", "data-db-0", "default")
    result = run_pass(OUT_OF_SERVICE_TAINT="never")
    assert result.code == EXIT_OK and attached(cluster) == []
    released_fields(result, cluster, va, pvc)


def test_an_orphan_whose_pv_names_another_claim_is_left_alone(cluster, run_pass):
    _pvc, pv, _va = fc.add_volume(cluster, "data-gone-0", attached_to="dead")
    pv["spec"]["claimRef"]["uid"] = "00000000-0000-0000-0000-000000000000"  # bound to an earlier claim
    cluster.add(pv)
    result = run_pass()
    assert result.code == EXIT_OK and deletes(cluster, "volumeattachments") == []
    assert result.lines("proven down, nothing to do") and len(attached(cluster)) == 1


@pytest.mark.parametrize("namespace, released", [("staging", True), ("prod", False)])
def test_an_orphan_is_released_only_inside_the_namespace_filters(cluster, run_pass, namespace, released):
    pvc, _pv, va = fc.add_volume(cluster, "data-gone-0", namespace=namespace, attached_to="dead")
    result = run_pass(INCLUDE_NAMESPACES="staging")
    assert result.code == EXIT_OK
    if released:
        released_fields(result, cluster, va, pvc)
        return
    assert deletes(cluster, "volumeattachments") == []
    [skip] = [line for line in result.lines("skipped") if line["object"] == va["metadata"]["name"]]
    assert skip["reason"] == "orphaned, but PVC prod/data-gone-0 is in a namespace outside the filters"


def test_an_orphan_is_left_while_pod_selector_is_set(cluster, run_pass):
    _pvc, _pv, va = fc.add_volume(cluster, "data-gone-0", attached_to="dead")
    result = run_pass(POD_SELECTOR="app=db")
    assert result.code == EXIT_OK and deletes(cluster, "volumeattachments") == []
    [skip] = [line for line in result.lines("skipped") if line["object"] == va["metadata"]["name"]]
    assert skip["reason"] == "orphaned, but POD_SELECTOR is set and no pod is left to match it"


def test_an_inline_attachment_is_left_saying_why(cluster, run_pass):
    va = cluster.add(fc.inline_attachment("dead"))
    result = run_pass()
    assert result.code == EXIT_OK and deletes(cluster, "volumeattachments") == []
    [skip] = [line for line in result.lines("skipped") if line["object"] == va["metadata"]["name"]]
    assert skip["reason"] == ("inline volume (CSI migration): no PersistentVolume traces it to a claim, so it is left "
                              "alone; detach it by hand if it blocks a pod")
