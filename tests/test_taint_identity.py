"""Our out-of-service taint by identity (issue 27, items 3 and 4): who added it and for which machine, undone only
after that machine rebooted, and on before any VolumeAttachment of the node is released (ceph-csi's contract)."""

from __future__ import annotations

import time

import pytest
from helpers import attached, detached, sixty_pods_freed
from test_out_of_service import oos_taints, stuck

from rwo_failover.model import OUT_OF_SERVICE_KEY as OOS_KEY
from rwo_failover.run.exitcodes import EXIT_OK, EXIT_REFUSED
from rwo_testkit import fake_cluster as fc

# What rwo-failover 0.1 wrote on the Node with its taint: annotations its own kubelet may write (NodeRestriction
# lets a kubelet write every annotation on its Node). They are read no more.
LEGACY = ("rwo-failover.io/out-of-service-added-at", "rwo-failover.io/out-of-service-applied-by",
          "rwo-failover.io/taint-node-uid", "rwo-failover.io/taint-boot-id", "rwo-failover.io/taint-addresses")


@pytest.fixture
def cluster(api):
    """Four live workers, w0..w3, beside the nodes a test adds: the cluster of tests/test_out_of_service.py."""
    for i in range(4):
        fc.live_node(api, f"w{i}")
    return api


def node_patches(requests) -> list:
    return [r for r in requests if r.verb == "patch" and r.resource == "nodes"]


def annotations(api, node: str) -> dict:
    return api.get("nodes", node)["metadata"].get("annotations") or {}


def kept_events(api, node: str) -> list[dict]:
    return [e for e in api.objects("events") if e["reason"] == "OutOfServiceTaintKept"
            and e["involvedObject"]["name"] == node]


# --- who added it, and for which machine: a record in our namespace, never on the Node -----------------------

def test_the_taint_is_recorded_in_our_namespace_before_it_is_added_and_nothing_is_written_on_the_node(cluster,
                                                                                                      run_pass):
    before = fc.dead_node(cluster, "dead")
    stuck(cluster, "dead")

    result = run_pass()

    assert result.code == EXIT_OK
    [taint] = oos_taints(cluster, "dead")
    [record] = fc.taint_records(cluster)
    assert record["addedAt"] == taint["timeAdded"], "when: the taint's own timeAdded"
    assert record["node"] == "dead" and record["nodeUID"] == before["metadata"]["uid"]
    assert record["bootID"] == before["status"]["nodeInfo"]["bootID"]
    assert record["addresses"] == f"InternalIP={fc.internal_ip('dead')},Hostname=dead"
    [stored] = [c for c in cluster.objects("configmaps") if c["metadata"]["name"].startswith("rwo-taint-")]
    assert stored["metadata"]["name"] == "rwo-taint-" + before["metadata"]["uid"]
    assert stored["metadata"]["namespace"] == "rwo-failover"
    writes = [(r.verb, r.resource) for r in result.requests if r.could_change]
    assert writes.index(("create", "configmaps")) < writes.index(("patch", "nodes")), "write-ahead"
    [patch] = node_patches(result.requests)
    assert not (patch.body["metadata"].get("annotations") or {}), "nothing written on the Node but the taint"
    assert patch.body["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert not set(LEGACY) & set(annotations(cluster, "dead"))


def back_node(api, name: str = "back", ready_for: float = 120, **mark) -> dict:
    """A node Ready again with a fresh Lease that carries our taint, recorded by `fc.mark_ours(**mark)`."""
    node = fc.node(name, ready="True", since=ready_for, taints=[fc.our_taint()])
    created = api.add(fc.mark_ours(api, node, **mark))
    api.add(fc.lease(name, 2))
    return created


def test_after_a_reboot_our_taint_and_its_record_come_off(cluster, run_pass):
    back_node(cluster)
    result = run_pass()
    assert result.code == EXIT_OK and result.summary["taints_removed"] == 1
    assert oos_taints(cluster, "back") == [] and fc.taint_records(cluster) == []
    [removed] = [e for e in cluster.objects("events") if e["reason"] == "OutOfServiceTaintRemoved"]
    assert "rebooted" in removed["message"] and fc.BOOT_BEFORE in removed["message"]


def test_a_node_back_without_rebooting_keeps_our_taint_with_one_warning(cluster, run_pass):
    back_node(cluster, boot_id=None)  # the bootID recorded is the one it reports now: its network came back

    first, second = run_pass(), run_pass()

    assert first.code == second.code == EXIT_OK, "recovering, not split-brain"
    assert node_patches(first.requests + second.requests) == [] and len(oos_taints(cluster, "back")) == 1
    assert [s for s in first.lines("skipped") if s["object"] == "back" and "without rebooting" in s["reason"]]
    [event] = kept_events(cluster, "back")
    assert event["type"] == "Warning" and "without rebooting" in event["message"]
    assert "Reboot the machine" in event["message"] and "docs/fencing.md" in event["message"]
    assert len(fc.taint_records(cluster)) == 1, "the record stays with its taint"


@pytest.mark.parametrize("mark, says", [
    ({"uid": "0d6f1c9e-6a0e-4cf1-9a53-5f0b7c1d2e3f"}, "for the Node object with uid 0d6f1c9e"),
    ({"boot_id": ""}, "no bootID was recorded"),
])
def test_our_taint_for_another_node_object_or_an_unknown_boot_stays(cluster, run_pass, mark, says):
    back_node(cluster, **mark)
    result = run_pass()
    assert result.code == EXIT_OK and node_patches(result.requests) == []
    assert len(oos_taints(cluster, "back")) == 1
    [event] = kept_events(cluster, "back")
    assert says in event["message"]


def human_taint_with_forged_annotations(api, name: str = "back") -> dict:
    """A human's out-of-service taint on a node whose kubelet wrote, on its own Node, every annotation rwo-failover
    0.1 recorded its taints with: who, when (the human taint's own timeAdded), this Node object and a bootID from
    before (a reboot). NodeRestriction lets a kubelet write all of them; only the taint is beyond it."""
    added = "2026-11-21T10:00:00Z"
    node = fc.node(name, ready="True", since=3600, taints=[fc.our_taint(added)])
    node["metadata"]["uid"] = "5b0c1a52-2f0e-4b56-9a0a-0c9b1d5e7f11"
    node["metadata"]["annotations"].update(dict(zip(LEGACY, (
        added, "rwo-failover", node["metadata"]["uid"], fc.BOOT_BEFORE, "InternalIP=10.0.0.9"), strict=True)))
    created = api.add(node)
    api.add(fc.lease(name, 2))
    return created


def test_forged_annotations_never_make_a_human_s_taint_ours(cluster, run_pass):
    """Hole 3 of issue 35: the annotations once proved provenance, and a kubelet writes them. The human's taint,
    matching every forged annotation, stays; the node, alive under an out-of-service taint that is not ours, is
    split-brain (exit 3, the Warning), as under any human's taint."""
    human_taint_with_forged_annotations(cluster)

    result = run_pass()

    assert result.code == EXIT_REFUSED
    assert node_patches(result.requests) == [] and len(oos_taints(cluster, "back")) == 1
    assert result.summary["taints_removed"] == 0
    assert [e for e in cluster.objects("events") if e["reason"] == "ShutdownTaintOnLiveNode"
            and e["involvedObject"]["name"] == "back"]
    assert [v for v in result.lines("refusing node: tainted for shutdown but alive") if v["node"] == "back"]


def test_forged_annotations_never_make_a_human_s_taint_ours_even_outside_shutdown_taints(cluster, run_pass):
    """With SHUTDOWN_TAINTS not naming the out-of-service taint, the human's taint is not judged at all: no
    verdict, no write, exit 0."""
    human_taint_with_forged_annotations(cluster)

    result = run_pass(SHUTDOWN_TAINTS="node.cloudprovider.kubernetes.io/shutdown")

    assert result.code == EXIT_OK and node_patches(result.requests) == []
    assert len(oos_taints(cluster, "back")) == 1 and result.summary["taints_removed"] == 0


def test_a_record_of_ours_for_a_taint_that_is_gone_is_dropped_and_never_adopts_a_later_one(cluster, run_pass):
    """A human removed our taint: the record outlives it and is dropped (preconditioned on the record read); a taint
    the human adds later has another timeAdded and is never ours."""
    node = fc.node("back", ready="True", since=3600, taints=[fc.OUT_OF_SERVICE])  # theirs: no timeAdded of ours
    cluster.add(fc.mark_ours(cluster, node))  # our record of a taint since removed
    cluster.add(fc.lease("back", 2))

    result = run_pass()

    assert result.code == EXIT_REFUSED, "a live node under a taint that is not ours: split-brain"
    assert fc.taint_records(cluster) == [] and len(oos_taints(cluster, "back")) == 1
    [drop] = [r for r in result.requests if r.verb == "delete" and r.resource == "configmaps"]
    assert drop.body["preconditions"]["uid"] and drop.body["preconditions"]["resourceVersion"]


def test_a_record_is_kept_when_its_taint_is_on_the_node_as_read_live(cluster, run_pass):
    """The plan saw the record stale (its node listed without the taint); the node as read just before the drop
    carries it after all: the record stays."""
    added = "2026-11-21T10:00:00Z"
    node = fc.node("back", ready="Unknown", since=600)
    cluster.add(fc.mark_ours(cluster, node, added))
    tainted = dict(cluster.get("nodes", "back"))
    tainted["spec"] = {**tainted["spec"], "taints": [fc.our_taint(added)]}

    def taint_on_get(req):
        if req.verb == "get" and req.resource == "nodes" and req.name == "back":
            cluster.add(tainted)
        return None
    cluster.hooks.append(taint_on_get)

    result = run_pass()

    assert len(fc.taint_records(cluster)) == 1
    assert not [r for r in result.requests if r.verb == "delete" and r.resource == "configmaps"]
    assert result.lines("taint record kept: its taint is on the node after all")


def test_our_taint_stays_while_a_volume_attachment_is_left_on_the_node(cluster, run_pass):
    back_node(cluster)
    fc.add_volume(cluster, "data-db-0", attached_to="back")
    result = run_pass()
    assert node_patches(result.requests) == [] and len(oos_taints(cluster, "back")) == 1
    assert [s for s in result.lines("skipped") if s["object"] == "back" and
            "VolumeAttachments are on the node" in s["reason"]]
    assert kept_events(cluster, "back") == [], "time settles it: no Warning"


def test_the_live_recheck_before_removal_judges_the_boot_again(cluster, run_pass):
    """The plan saw a reboot; the node as read live just before the patch says otherwise: no removal."""
    back_node(cluster)

    def unrebooted_on_get(req):
        if req.verb == "get" and req.resource == "nodes" and req.name == "back":
            node = cluster.get("nodes", "back")
            if node["status"]["nodeInfo"]["bootID"] != fc.BOOT_BEFORE:  # the boot recorded with our taint
                cluster.add(fc.rebooted(node, fc.BOOT_BEFORE))
        return None
    cluster.hooks.append(unrebooted_on_get)

    result = run_pass()

    assert node_patches(result.requests) == [] and len(oos_taints(cluster, "back")) == 1
    assert [line for line in result.lines("out-of-service taint left in place") if "without rebooting" in
            line["reason"]]


# --- the taint before any VolumeAttachment is released (ceph-csi 3.15+) -----------------------------------

def test_no_attachment_is_released_until_the_taint_is_read_back_on_the_node(cluster, run_pass):
    """Someone takes the taint off between our patch and the releases: the pods go, the attachments stay."""
    fc.dead_node(cluster, "dead")
    stuck(cluster, "dead")

    def untaint_after_the_first_pod_delete(req):
        if req.verb == "delete" and req.resource == "pods" and oos_taints(cluster, "dead"):
            node = cluster.get("nodes", "dead")
            node["spec"]["taints"] = [t for t in node["spec"]["taints"] if t["key"] != OOS_KEY]
            cluster.add(node)
        return None
    cluster.hooks.append(untaint_after_the_first_pod_delete)

    result = run_pass()

    assert result.code == 1, "a held attachment is a failure the next pass retries"
    assert cluster.objects("pods") == [] and len(attached(cluster)) == 1
    assert not [r for r in result.requests if r.verb == "delete" and r.resource == "volumeattachments"]
    assert [line for line in result.logs if "the out-of-service taint is not on the node" in line.get("message", "")
            + line.get("error", "")]


def test_the_taint_is_read_back_live_between_the_patch_and_each_release(cluster, run_pass):
    fc.dead_node(cluster, "dead")
    stuck(cluster, "dead")
    result = run_pass()
    assert result.code == EXIT_OK and detached(cluster) == []
    writes = [(r.verb, r.resource) for r in result.requests]
    patched, released = writes.index(("patch", "nodes")), writes.index(("delete", "volumeattachments"))
    assert ("get", "nodes") in writes[patched + 1:released], "a live read of the node after the taint"


def test_with_the_handoff_off_attachments_are_released_and_start_up_names_what_is_skipped(cluster, run_pass):
    from rwo_failover.run.cli import HANDOFF_OFF
    fc.dead_node(cluster, "dead")
    stuck(cluster, "dead")
    result = run_pass(OUT_OF_SERVICE_TAINT="never")
    assert result.code == EXIT_OK and oos_taints(cluster, "dead") == []
    assert detached(cluster) == []
    [line] = result.lines(HANDOFF_OFF)
    assert line["level"] in ("warning", "WARNING") and "ceph-csi" in line["skips"]
    assert "rbd" in line["skips"] and "cephfs" in line["skips"]
    assert not run_pass().lines(HANDOFF_OFF), "said only when the handoff is off"


def test_dry_run_says_it_would_release_after_its_would_be_taint(cluster, run_pass):
    fc.dead_node(cluster, "dead")
    stuck(cluster, "dead")
    result = run_pass(DRY_RUN="true")
    assert result.code == EXIT_OK and len(attached(cluster)) == 1
    assert result.lines("dry-run: would add the out-of-service taint")
    assert [line for line in result.logs if line["message"].startswith("dry-run: would delete")
            and "volumeattachment" in str(line).lower()]


def test_attachments_of_a_node_whose_taint_waits_for_deferred_pods_wait_too(cluster, run_pass):
    """MAX_PODS_PER_PASS defers a pod: the taint would delete it too, so it waits, and so do the attachments
    (released without the taint, ceph-csi would not fence). Not a failure: a later pass takes the rest."""
    fc.dead_node(cluster, "dead")
    stuck(cluster, "dead", name="db-0")
    stuck(cluster, "dead", name="db-1")

    first = run_pass(MAX_PODS_PER_PASS="1")

    assert first.code == EXIT_OK and first.summary["pods_deferred"] == 1
    assert oos_taints(cluster, "dead") == [] and len(attached(cluster)) == 2
    assert [s for s in first.lines("skipped") if s["kind"] == "volumeattachment"
            and "once the out-of-service taint is on" in s["reason"]]
    run_pass(MAX_PODS_PER_PASS="1")
    last = run_pass(MAX_PODS_PER_PASS="1")
    assert last.code == EXIT_OK and cluster.objects("pods") == [] and detached(cluster) == []
    assert len(oos_taints(cluster, "dead")) == 1


def test_an_odd_boot_id_is_recorded_by_its_digest_and_a_node_back_with_it_keeps_our_taint(cluster, run_pass):
    """What a kubelet writes is recorded bounded (model/bounded.py), as the fence's record is: a bootID that is no
    UUID (10 KB here) by its digest, so the taint patch always fits; back with the same bootID it has not
    rebooted, and our taint stays."""
    odd = "x" * 10_000 + "\n"
    node = fc.dead_node(cluster, "dead")
    node["status"]["nodeInfo"]["bootID"] = odd
    cluster.add(node)
    stuck(cluster, "dead")

    assert run_pass().code == EXIT_OK
    [record] = fc.taint_records(cluster)
    recorded = record["bootID"]
    assert recorded.startswith("sha256:") and len(recorded) < 100
    back = fc.node("dead", ready="True", since=120, taints=oos_taints(cluster, "dead"))
    back["metadata"] = dict(cluster.get("nodes", "dead")["metadata"])
    back["status"]["nodeInfo"]["bootID"] = odd  # the same boot: only its network came back
    cluster.add(back)
    cluster.add(fc.lease("dead", 2))
    time.sleep(2.1)  # Ready for RECOVERY_SECONDS=1 since our taint went on, on the server's whole seconds

    result = run_pass(RECOVERY_SECONDS="1")

    assert result.code == EXIT_OK and len(oos_taints(cluster, "dead")) == 1, result.lines("skipped")
    [event] = kept_events(cluster, "dead")
    assert "without rebooting" in event["message"] and len(event["message"]) <= 1024


def test_the_taint_record_of_many_addresses_is_bounded_and_the_node_s_annotations_are_left_to_others(cluster,
                                                                                                    run_pass):
    """A Node's 256 KiB of annotations is shared with everyone who writes them (kubectl apply's last-applied
    configuration, other controllers): 245 KiB of theirs, legal, and the kubelet's 560 extra addresses once made our
    taint patch too big (422 on every pass, never failed over). The record now lives in our namespace, and its copy of
    the addresses, for people, is a digest past 1 KiB."""
    node = fc.dead_node(cluster, "dead")
    node["metadata"].setdefault("annotations", {})["kubectl.kubernetes.io/last-applied-configuration"] = \
        "x" * (245 * 1024)
    node["status"]["addresses"] += [{"type": "ExternalIP", "address": f"2001:db8::{i:x}"} for i in range(560)]
    cluster.add(node)
    stuck(cluster, "dead")

    result = run_pass()

    assert result.code == EXIT_OK and len(oos_taints(cluster, "dead")) == 1, result.lines("")[-5:]
    [record] = fc.taint_records(cluster)
    assert record["addresses"].startswith("sha256:")


def test_our_record_of_a_node_s_taint_is_read_once_a_second_not_before_every_release(api, run_pass):
    """60 pods on a dead node, released through our taint in a second or so: its record is read live when the
    pass re-checks the node at most once per RECORD_READ_SECONDS (and after each write of ours to it), not before
    each of the 120 deletes."""
    result, took = sixty_pods_freed(api, run_pass)
    assert result.code == EXIT_OK and not api.objects("pods") and oos_taints(api, "dead")
    reads = [r for r in api.requests if r.verb == "list" and r.resource == "configmaps"
             and r.query.get("fieldSelector", "").startswith("metadata.name=rwo-taint-")]
    assert 1 <= len(reads) <= 3 + int(took), (len(reads), took)
