"""Our out-of-service taint by identity (issue 27, items 3 and 4): who added it and for which machine, undone only
after that machine rebooted, and on before any VolumeAttachment of the node is released (ceph-csi's contract)."""

from __future__ import annotations

import time

import pytest

from rwo_testkit import fake_cluster as fc
from rwo_failover.run.exitcodes import EXIT_OK
from rwo_failover.model import OOS_ANNOTATION, OUT_OF_SERVICE_KEY as OOS_KEY

from test_out_of_service import cluster, oos_taints, stuck  # noqa: F401 - cluster is a fixture

from helpers import detached, attached

OURS = ("rwo-failover.io/out-of-service-added-at", "rwo-failover.io/out-of-service-applied-by",
        "rwo-failover.io/taint-node-uid", "rwo-failover.io/taint-boot-id", "rwo-failover.io/taint-addresses")


def node_patches(requests) -> list:
    return [r for r in requests if r.verb == "patch" and r.resource == "nodes"]


def annotations(api, node: str) -> dict:
    return api.get("nodes", node)["metadata"].get("annotations") or {}


def kept_events(api, node: str) -> list[dict]:
    return [e for e in api.objects("events") if e["reason"] == "OutOfServiceTaintKept"
            and e["involvedObject"]["name"] == node]


# --- who added it, and for which machine -------------------------------------------------------------------

def test_the_taint_records_who_when_and_the_machine_in_the_same_preconditioned_patch(cluster, run_pass):
    before = fc.dead_node(cluster, "dead")
    stuck(cluster, "dead")

    result = run_pass()

    assert result.code == EXIT_OK
    [taint] = oos_taints(cluster, "dead")
    found = annotations(cluster, "dead")
    assert found["rwo-failover.io/out-of-service-applied-by"] == "rwo-failover"
    assert found[OOS_ANNOTATION] == taint["timeAdded"], "when: the server's time, the taint's own timeAdded"
    assert found["rwo-failover.io/taint-node-uid"] == before["metadata"]["uid"]
    assert found["rwo-failover.io/taint-boot-id"] == before["status"]["nodeInfo"]["bootID"]
    assert found["rwo-failover.io/taint-addresses"] == f"InternalIP={fc.internal_ip('dead')},Hostname=dead"
    [patch] = node_patches(result.requests)
    assert set(OURS) <= set(patch.body["metadata"]["annotations"]), "one write: taint and provenance together"
    assert patch.body["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def back_node(api, name: str = "back", ready_for: float = 120, **mark) -> dict:
    """A node Ready again with a fresh Lease that carries our taint, recorded by `fc.mark_ours(**mark)`."""
    node = fc.node(name, ready="True", since=ready_for, taints=[fc.our_taint()])
    created = api.add(fc.mark_ours(node, **mark))
    api.add(fc.lease(name, 2))
    return created


def test_after_a_reboot_our_taint_and_every_annotation_of_ours_come_off(cluster, run_pass):
    back_node(cluster)
    result = run_pass()
    assert result.code == EXIT_OK and result.summary["taints_removed"] == 1
    assert oos_taints(cluster, "back") == []
    assert not set(OURS) & set(annotations(cluster, "back"))
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


def test_an_out_of_service_taint_without_our_provenance_is_never_removed(cluster, run_pass):
    """Only the timestamp annotation (a version before provenance was recorded, or a copy): not proven ours."""
    node = fc.node("back", ready="True", since=3600, taints=[fc.our_taint()])
    node["metadata"]["annotations"][OOS_ANNOTATION] = "2026-11-21T10:00:00Z"
    cluster.add(node)
    cluster.add(fc.lease("back", 2))

    result = run_pass()

    assert result.code == EXIT_OK and node_patches(result.requests) == []
    assert len(oos_taints(cluster, "back")) == 1
    [event] = kept_events(cluster, "back")
    assert "no rwo-failover.io/out-of-service-applied-by annotation" in event["message"]


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
    back = back_node(cluster)
    boot = back["status"]["nodeInfo"]["bootID"]

    def unrebooted_on_get(req):
        if req.verb == "get" and req.resource == "nodes" and req.name == "back":
            node = cluster.get("nodes", "back")
            if node["metadata"]["annotations"]["rwo-failover.io/taint-boot-id"] != boot:
                node["metadata"]["annotations"]["rwo-failover.io/taint-boot-id"] = boot
                cluster.add(node)
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
    recorded = annotations(cluster, "dead")["rwo-failover.io/taint-boot-id"]
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


def test_the_taint_record_leaves_the_node_s_annotation_budget_to_its_other_writers(cluster, run_pass):
    """A Node's 256 KiB of annotations is shared with everyone who writes them (kubectl apply's last-applied
    configuration, other controllers): 245 KiB of theirs, legal, and the kubelet's 560 extra addresses (15 KiB, under
    the 16 KiB the fence's record allows) made our taint patch too big: 422 on every pass, never failed over (found by
    an attack on model/bounded.py). The taint's record of the addresses is for people, so past 1 KiB it is a digest."""
    node = fc.dead_node(cluster, "dead")
    node["metadata"].setdefault("annotations", {})["kubectl.kubernetes.io/last-applied-configuration"] = \
        "x" * (245 * 1024)
    node["status"]["addresses"] += [{"type": "ExternalIP", "address": f"2001:db8::{i:x}"} for i in range(560)]
    cluster.add(node)
    stuck(cluster, "dead")

    result = run_pass()

    assert result.code == EXIT_OK and len(oos_taints(cluster, "dead")) == 1, result.lines("")[-5:]
    assert annotations(cluster, "dead")["rwo-failover.io/taint-addresses"].startswith("sha256:")
