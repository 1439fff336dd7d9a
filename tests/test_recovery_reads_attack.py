"""Attacks on "recovery confirmation reads the pods where a replacement can be" (issue 25: observe/lookups.py
recovery_pods, kube/keep.py mounting) and on decode.Memo's forget, fixture tier, real client.

Each test here showed a defect on the code it was written against (a strict xfail until its fix):

- a record that comes due between the cached read and the live re-read of continuous mode (observe_again keeps
  the cached pass's recovery pods, read for the earlier "now") is judged "not recovered" from pods read as if it
  were not due: its RWOVolumeNotRecovered names the wrong thing (the code before listed its namespace every pass);
- decode.Memo forgets by the reflector's key, model.reader.name_of, which is cut at 300 characters: pods of one
  namespace whose namespace/name agree in their first 300 characters share a key, and all but one of them stay in
  memory after the watch deleted them (the defect f6ad058 fixed, for names of that length);
- (older than the change: 9e86285 does the same) a record whose deletedAt is later than the reading pass's
  "now" is "obsolete" and deleted without a word: a record written through one API server and read, a second
  later, through another whose clock is behind (by less than the 2 s the Date check allows) is lost, and the
  recovery it watched is never confirmed nor reported.
"""

from __future__ import annotations

import gc
import time
from datetime import UTC, datetime

from conftest import watched
from helpers import recovery_records
from test_convert_attack import wait_until, watched_tenant_pods
from test_watch import settings_for

from rwo_failover.kube import Api, load_api_client
from rwo_failover.model import RECOVERY_LABEL, Cached, Node, Pod, RecoveryEntry
from rwo_failover.run import runner
from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit import fake_cluster as fc


def deployment_outage(api) -> None:
    fc.outage(api, dead="dead", pods=())
    fc.add_volume(api, "data-app", namespace="shop", attached_to="dead")
    api.add(fc.pod("app-7d9f-x2x4q", "dead", namespace="shop", claims=["data-app"], terminating=True,
                   owner="ReplicaSet"))


def test_a_record_that_comes_due_during_the_live_re_read_still_says_exactly_what_is_missing(api, kubeconfig, run_pass):
    """Continuous mode: a cached pass whose plan writes (a second outage) is made again from a live read, which
    keeps the pods the cached pass read (observe_again) and judges them at the live 'now'. When the record's
    RECOVERY_TIMEOUT_SECONDS ends between the two (a loaded API server: the live node list takes 4 s), the live
    judgment says "not recovered" from the node lists alone, which cannot see a replacement whose volume is not
    attached yet: the Warning says it was never scheduled. The code before listed the namespace every pass and
    said what test_recovery_reads.py expects of a due record: the attachment on w1 is not attached."""
    deployment_outage(api)
    assert run_pass(OUT_OF_SERVICE_TAINT="never").code == EXIT_OK
    api.attacher.detach()  # the CSI attacher detaches the released volume from the dead node
    [record] = recovery_records(api)
    # The replacement: scheduled on w1, its volume not attached there yet.
    api.add(fc.pod("app-7d9f-q8w2p", "w1", namespace="shop", claims=["data-app"], owner="ReplicaSet", ready="True"))
    # A second outage: the cached plan writes, so the pass reads again live before acting.
    fc.dead_node(api, "dead2")
    fc.add_volume(api, "data-db-0", attached_to="dead2")
    api.add(fc.pod("db-0", "dead2", claims=["data-db-0"], terminating=True))
    deleted = datetime.strptime(record["deletedAt"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    timeout = int(time.time() - deleted.timestamp()) + 2  # the record comes due 1 to 2 s from now
    settings = settings_for(kubeconfig, OUT_OF_SERVICE_TAINT="never", RECOVERY_TIMEOUT_SECONDS=str(timeout))
    # The watch cache as continuous mode holds it now: the nodes and our record.
    nodes = tuple(Node.from_json(n) for n in api.objects("nodes"))
    entries = tuple(RecoveryEntry.from_json(c) for c in api.objects("configmaps")
                    if (c["metadata"].get("labels") or {}).get(RECOVERY_LABEL))

    def slow_live_node_list(req):  # a loaded API server: the live, consistent node list takes 4 s
        if req.verb == "list" and req.resource == "nodes" and "resourceVersion" not in req.query:
            time.sleep(4)
        return None
    api.hooks.append(slow_live_node_list)

    code = runner.run_pass(Api(load_api_client(settings), settings), settings,
                           cache=lambda _api: Cached(nodes, (), entries, ()), sightings=watched())

    assert code == EXIT_OK
    [event] = [e for e in api.objects("events") if e["reason"] == "RWOVolumeNotRecovered"]
    assert "attachment to node w1 is not attached" in event["message"], event["message"]


NAMESPACE = "t" * 62 + "1"  # 63 characters, a namespace name's limit


def test_tenant_pods_whose_names_agree_in_300_characters_are_released_once_the_watch_removes_them(api, kubeconfig):
    """A pod's name may have 253 characters and its namespace 63: namespace/name is up to 317 characters, and the
    reflector keys its cache, and decode.Memo its forget, by model.reader.name_of, which keeps the first 300. Three
    pods whose names differ only in their last characters are one key: the cache holds one of them, the memo all
    three, and once the tenant deletes them the watch forgets one conversion; the other two stay until the next
    relist (RELIST_SECONDS, an hour by default), as every deleted pod did before f6ad058."""
    names = ["p" * 250 + f"{i:03d}" for i in range(3)]  # 253 characters each
    watched = watched_tenant_pods(api, kubeconfig, NAMESPACE, names)
    try:
        for name in names:
            api.remove("pods", name, NAMESPACE)
        wait_until("the deletes applied", lambda: not watched.items)
        wait_until("every DELETED event applied", lambda: watched.events >= len(names), timeout=5)
        gc.collect()

        held = [o.name[-3:] for o in gc.get_objects() if isinstance(o, Pod) and o.namespace == NAMESPACE]
        assert held == [], f"deleted pods still held in memory: {held}"
    finally:
        watched.stop()


def test_a_record_read_through_an_api_server_whose_clock_is_a_little_behind_is_kept_and_confirmed(api, run_pass):
    """Older than the change (planner/recovery.py _doubt, unchanged since 9e86285). HA control planes run several
    API servers; the Date check allows each a clock up to 2 s off the stamps it checks, and for nodes "clocks that
    disagree judge nothing" (docs/safety.md). A record's deletedAt is the writing pass's server clock: the next
    pass (continuous mode runs one within a second of our own writes) reads through an API server 1.5 s behind,
    finds deletedAt later than its "now", and deletes the record as "obsolete", without an Event or a sample. The
    replacement is Running and Ready with its volume attached, and no later pass ever confirms it."""
    deployment_outage(api)
    while time.time() % 1 > 0.1:  # the first pass starts just past a whole second: its deletedAt is that second
        time.sleep(0.01)
    started = time.time()
    assert run_pass(OUT_OF_SERVICE_TAINT="never").code == EXIT_OK
    assert len(recovery_records(api)) == 1
    api.add(fc.pod("app-7d9f-q8w2p", "w1", namespace="shop", claims=["data-app"], owner="ReplicaSet", ready="True"))
    api.add(fc.attachment("pv-shop-data-app", "w1"))
    api.date_offset = -1.5  # the next pass's answers come from an API server whose clock is 1.5 s behind
    assert run_pass(OUT_OF_SERVICE_TAINT="never").code == EXIT_OK
    assert time.time() - started < 1.3, "the second pass must read within the second the record was written"
    api.date_offset = 0.0
    time.sleep(2)

    assert run_pass(OUT_OF_SERVICE_TAINT="never").code == EXIT_OK

    reasons = [e["reason"] for e in api.objects("events")]
    assert "RWOVolumeRecovered" in reasons, reasons
