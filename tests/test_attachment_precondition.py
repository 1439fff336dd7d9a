"""A VolumeAttachment is deleted only as it was inspected: its delete carries the UID the pass judged, as a pod's
does. Its name is a hash of (volume, driver, node), so a new attachment of the same volume to the same node,
made after the pass judged the old one (a pod scheduled there since, the attach-detach controller making it
again), has the same name: without the precondition it would be deleted unjudged."""

from __future__ import annotations

import json

import pytest
from helpers import attached

from rwo_failover.run.exitcodes import EXIT_FAILED, EXIT_OK
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import Response


def test_an_attachment_made_again_under_the_same_name_after_the_plan_is_left_alone(api, run_pass):
    fc.outage(api, pods=("db-0",))
    [judged] = api.objects("volumeattachments")
    made_again: list[str] = []

    def remake(req):
        if req.verb == "delete" and req.resource == "volumeattachments" and not made_again:
            old = api.get("volumeattachments", req.name)
            api.remove("volumeattachments", req.name)
            fresh = json.loads(json.dumps(old))
            for stale in ("uid", "resourceVersion", "creationTimestamp"):
                fresh["metadata"].pop(stale, None)
            made_again.append(api.add(fresh)["metadata"]["uid"])
        return None
    api.hooks.append(remake)

    result = run_pass()

    [delete] = [r for r in result.requests if r.verb == "delete" and r.resource == "volumeattachments"]
    assert delete.body["preconditions"] == {"uid": judged["metadata"]["uid"]}, "the UID the pass judged"
    assert [va["metadata"]["uid"] for va in api.objects("volumeattachments")] == made_again, \
        "the attachment made after the plan is not the one judged: left for the next pass to judge"
    assert result.code == EXIT_OK and result.summary["attachments_deleted"] == 0


def _conflict(message: str) -> Response:
    return Response(409, json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                                     "reason": "Conflict", "code": 409}).encode(), {"Content-Type": "application/json"})


@pytest.mark.parametrize("resource", ["volumeattachments", "pods"])
def test_a_409_after_a_lost_answer_is_no_proof_of_the_delete(api, run_pass, resource):
    """The first delete's answer is lost and it never landed; the retry gets a 409 that is not the uid precondition
    (an admission webhook's Conflict). The object judged is still there: reported as a failure, never as deleted,
    and no Event says it was released (found by an attack on the uid precondition)."""
    fc.outage(api, pods=("db-0",))
    judged = {o["metadata"]["uid"] for o in api.objects(resource)}
    tries: list[str] = []

    def answer(req):
        if req.verb == "delete" and req.resource == resource:
            tries.append(req.name)
            if len(tries) == 1:  # headers and 3 bytes, then the connection closes: the answer is lost
                return Response(200, b'{"kind":"Status","status":"Success"}', {"Content-Type": "application/json"},
                                cut_after=3)
            return _conflict('admission webhook "guard.example.com" denied the request: Conflict')
        return None
    api.hooks.append(answer)

    result = run_pass()

    assert {o["metadata"]["uid"] for o in api.objects(resource)} == judged and len(tries) == 2
    counted = "attachments_deleted" if resource == "volumeattachments" else "pods_deleted"
    assert result.summary[counted] == 0 and result.summary["failures"] >= 1 and result.code == EXIT_FAILED
    reason = "VolumeReleasedFromDeadNode" if resource == "volumeattachments" else "ForceDeletedFromDeadNode"
    released = [e for e in api.objects("events") if e.get("reason") == reason]
    assert released == [], "no Event for a delete that did not land"


def test_an_attachment_read_without_a_uid_is_skipped_never_deleted(api, run_pass):
    """kube-apiserver always sets metadata.uid; an answer without one was reshaped on its way (a proxy). Its delete
    could carry no precondition that names it: skipped, with the reason, and never sent."""
    fc.outage(api, pods=("db-0",))

    def without_uid(req):
        if req.verb == "list" and req.resource == "volumeattachments":
            items = [dict(va, metadata={k: v for k, v in va["metadata"].items() if k != "uid"})
                     for va in api.objects("volumeattachments")]
            body = {"kind": "VolumeAttachmentList", "apiVersion": "storage.k8s.io/v1",
                    "metadata": {"resourceVersion": str(api.resource_version)}, "items": items}
            return Response(200, json.dumps(body).encode(), {"Content-Type": "application/json"})
        return None
    api.hooks.append(without_uid)

    result = run_pass()

    assert not [r for r in result.requests if r.verb == "delete" and r.resource == "volumeattachments"]
    assert len(attached(api)) == 1 and result.summary["attachments_replaced"] == 0
    skips = [line for line in result.logs if line.get("volumeattachment") or line.get("kind") == "volumeattachment"]
    assert any("uid" in json.dumps(line) for line in skips), "the skip names the missing uid"


def test_a_pod_read_without_a_uid_is_skipped_never_deleted(api, run_pass):
    """As for attachments: a pod's delete must name the pod judged, and "" names none (kube-apiserver answers 409).
    Before, such a pod was planned; with its first delete's answer lost, the retry's 409 and a read-back that found
    the pod (with its real uid, not "") counted it deleted, its attachment was released under it and its Event
    said so (found by an attack on the read-back)."""
    fc.outage(api, pods=("db-0",))
    [pod] = api.objects("pods")

    def without_uid(req):
        if req.verb == "list" and req.resource == "pods":
            node = req.query.get("fieldSelector", "").partition("spec.nodeName=")[2]
            items = [dict(p, metadata={k: v for k, v in p["metadata"].items() if k != "uid"})
                     for p in api.objects("pods") if p["spec"].get("nodeName") == node]
            body = {"kind": "PodList", "apiVersion": "v1",
                    "metadata": {"resourceVersion": str(api.resource_version)}, "items": items}
            return Response(200, json.dumps(body).encode(), {"Content-Type": "application/json"})
        if req.verb == "delete" and req.resource == "pods":  # were one sent, its answer is lost
            return Response(200, b'{"kind":"Status","status":"Success"}', {"Content-Type": "application/json"},
                            cut_after=3)
        return None
    api.hooks.append(without_uid)

    result = run_pass()

    assert not [r for r in result.requests if r.verb == "delete" and r.resource == "pods"]
    assert [p["metadata"]["uid"] for p in api.objects("pods")] == [pod["metadata"]["uid"]]
    assert len(attached(api)) == 1, "pod first, then volume: its attachment stays"
    assert result.summary["pods_deleted"] == 0
    assert any(line.get("message") == "skipped" and "uid" in json.dumps(line) for line in result.logs)


def test_a_delete_found_done_on_retry_reads_no_finalizers_from_an_earlier_answer(api, run_pass):
    """A pod delete lands and its answer is lost; the StatefulSet makes the pod again; the retry's 409 and the
    read-back (another uid) say ours landed, and no finalizer holds the pod we judged. The answer to the write
    before it (the recovery record's create, here with a finalizer a mutating webhook added) says nothing about
    the pod; read as the delete's answer, it made the pod 'held' and the pass fail."""
    fc.outage(api, pods=("db-0",))
    tries: list[str] = []

    def answer(req):
        if req.verb == "create" and req.resource == "configmaps" and req.could_change:
            req.body = dict(req.body, metadata=dict(req.body["metadata"], finalizers=["example.com/audit"]))
            return None
        if req.verb == "delete" and req.resource == "pods":
            tries.append(req.name)
            if len(tries) == 1:  # it lands, the pod is made again, and the answer is lost
                old = api.get("pods", req.name, "default")
                api.remove("pods", req.name, "default")
                again = json.loads(json.dumps(old))
                for stale in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
                    again["metadata"].pop(stale, None)
                api.add(again)
                return Response(200, b'{"kind":"Status","status":"Success"}', {"Content-Type": "application/json"},
                                cut_after=3)
        return None
    api.hooks.append(answer)

    result = run_pass()

    assert len(tries) == 2 and len(api.objects("pods")) == 1, "the pod made again is left alone"
    assert result.summary["pods_deleted"] == 1 and result.summary["failures"] == 0
