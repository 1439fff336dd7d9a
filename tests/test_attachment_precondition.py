"""A VolumeAttachment is deleted only as it was inspected: its delete carries the UID the pass judged, as a pod's
does. Its name is a hash of (volume, driver, node), so a new attachment of the same volume to the same node,
made after the pass judged the old one (a pod scheduled there since, the attach-detach controller making it
again), has the same name: without the precondition it would be deleted unjudged."""

from __future__ import annotations

import json

from rwo_testkit import fake_cluster as fc
from rwo_failover.run.exitcodes import EXIT_OK


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
