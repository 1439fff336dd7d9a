"""A deleted VolumeAttachment stays, marked, until the CSI external-attacher has detached its volume: its finalizer
holds it (kube-apiserver does; the fixture too since issue 37, and node_sim.py plays the attacher on the real
server). The fixture used to remove it at once, which hid what a later pass makes of one still being detached:
it deleted it again, wrote its Events again, and counted its node toward the nodes-per-pass brake, so a slow
attacher after one outage could refuse the next."""

from __future__ import annotations

from helpers import deletes, detached, pod_names, stuck

from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit import fake_cluster as fc

LIVE = 20


def being_detached(api) -> set[str]:
    return {v["metadata"]["name"] for v in api.objects("volumeattachments") if v["metadata"].get("deletionTimestamp")}


def test_a_later_pass_leaves_an_attachment_being_detached_alone_and_says_so(api, run_pass):
    for i in range(4):
        fc.live_node(api, f"w{i}")
    fc.dead_node(api, "dead")
    stuck(api, "dead")
    first = run_pass()
    assert first.code == EXIT_OK and first.summary["attachments_deleted"] == 1
    [held] = being_detached(api)  # the attacher has not detached it yet
    before = len(api.requests)

    second = run_pass()

    assert second.code == EXIT_OK
    assert [r for r in api.requests[before:] if r.could_change] == [], "no second delete, no second Event"
    [skip] = [line for line in second.lines("skipped") if line["object"] == held]
    assert skip["reason"].startswith("being detached: deleted already")
    assert second.summary["attachments_planned"] == 0
    assert detached(api) == []


def test_attachments_still_being_detached_do_not_count_toward_the_nodes_brake(api, run_pass):
    """Five nodes freed (MAX_NODES_PER_PASS=5), their attachments still held by a slow attacher, then a sixth node
    goes down: only the sixth has anything left to release, so it is freed, not refused."""
    for i in range(LIVE):
        fc.live_node(api, f"w{i:02d}")
    for i in range(5):
        fc.dead_node(api, f"dead-{i}")
        stuck(api, f"dead-{i}", name=f"db-{i}")
    assert run_pass().code == EXIT_OK and len(being_detached(api)) == 5
    fc.dead_node(api, "dead-5")
    stuck(api, "dead-5", name="db-5")

    result = run_pass()

    assert result.code == EXIT_OK and result.summary["brake"] == ""
    assert pod_names(api) == set() and [r.name for r in deletes(api, "pods")][-1] == "db-5"
    assert len(being_detached(api)) == 6 and detached(api) == []
