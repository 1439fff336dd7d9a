"""MAX_PODS_PER_PASS in whole passes, as planner/caps.py plans it: found by `make mutants` (issue 37), whose first run
on planner.caps left 26 mutants alive. Each pod left for a later pass is named with the reason; its attachment
stays; a node with a deferred pod gets no out-of-service taint this pass, and when the taint was to go on first
(storage that fences on it), none of its attachments are released until then; every other node is acted on."""

from __future__ import annotations

from helpers import attached, deletes, oos_taints, stuck

from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit import fake_cluster as fc

DEFERRED_POD = ("deferred: a pass deletes MAX_PODS_PER_PASS=2 pods, taken fairly across namespaces; a later pass "
                "takes this one")
DEFERRED_ATTACHMENT = ("deferred: released only once the out-of-service taint is on (ceph-csi fences on it), which "
                       "waits for the deferred pods")


def outage(api, nodes: dict[str, int], taints=(fc.SHUTDOWN,)) -> dict[str, str]:
    """Dead nodes with that many stuck pods each; the attachment of each pod, by pod name."""
    for i in range(6):
        fc.live_node(api, f"w{i}")
    attachment = {}
    for node, count in nodes.items():
        fc.dead_node(api, node, taints=taints)
        for i in range(count):
            name = f"{node}-db-{i}"
            stuck(api, node, name=name)
            attachment[name] = next(va["metadata"]["name"] for va in api.objects("volumeattachments")
                                    if va["spec"]["source"]["persistentVolumeName"] == f"pv-default-data-{name}")
    return attachment


def skips(result) -> list[tuple[str, str, str]]:
    return sorted((line["kind"], line["object"], line["reason"]) for line in result.lines("skipped"))


def test_a_pod_past_the_cap_is_named_and_with_the_taint_first_no_attachment_goes_before_it(api, run_pass):
    attachment = outage(api, {"dead": 3})

    result = run_pass(MAX_PODS_PER_PASS="2")

    assert result.code == EXIT_OK
    assert sorted(r.name for r in deletes(api, "pods")) == ["dead-db-0", "dead-db-1"]
    assert oos_taints(api, "dead") == [] and deletes(api, "volumeattachments") == []
    assert skips(result) == sorted([("pod", "default/dead-db-2", DEFERRED_POD)] + [
        ("volumeattachment", attachment[f"dead-db-{i}"], DEFERRED_ATTACHMENT) for i in (0, 1)])

    later = run_pass(MAX_PODS_PER_PASS="2")

    assert later.code == EXIT_OK and len(oos_taints(api, "dead")) == 1 and attached(api) == []


def test_without_the_taint_the_pods_kept_release_their_attachments_and_the_deferred_one_keeps_its(api, run_pass):
    attachment = outage(api, {"dead": 3})

    result = run_pass(MAX_PODS_PER_PASS="2", OUT_OF_SERVICE_TAINT="never")

    assert result.code == EXIT_OK and skips(result) == [("pod", "default/dead-db-2", DEFERRED_POD)]
    assert sorted(r.name for r in deletes(api, "volumeattachments")) == sorted(
        attachment[f"dead-db-{i}"] for i in (0, 1))
    assert [va["metadata"]["name"] for va in attached(api)] == [attachment["dead-db-2"]]
    assert not result.lines("VolumeAttachment kept: its pod is not gone, and the controller would re-create it")


def test_a_node_the_cap_does_not_reach_is_acted_on_whole_beside_one_it_does(api, run_pass):
    outage(api, {"a-dead": 1, "b-dead": 3})

    result = run_pass(MAX_PODS_PER_PASS="2", OUT_OF_SERVICE_TAINT="never")

    assert result.code == EXIT_OK
    assert sorted(r.name for r in deletes(api, "pods")) == ["a-dead-db-0", "b-dead-db-0"]
    assert [line["object"] for line in result.lines("skipped")] == ["default/b-dead-db-1", "default/b-dead-db-2"]


def test_with_the_taint_already_on_the_pods_kept_release_their_attachments(api, run_pass):
    """Nothing waits for a taint the node already carries (a human's, say): only the deferred pod's attachment
    stays."""
    attachment = outage(api, {"dead": 3}, taints=(fc.SHUTDOWN, fc.OUT_OF_SERVICE))

    result = run_pass(MAX_PODS_PER_PASS="2")

    assert result.code == EXIT_OK and skips(result) == [("pod", "default/dead-db-2", DEFERRED_POD)]
    assert [va["metadata"]["name"] for va in attached(api)] == [attachment["dead-db-2"]]
