"""Issue 25, items 1 and 7: the watch cache decides only *when* a pass runs, never *what* it writes; and a dead
kubelet's last word about a pod is no alibi. Over HTTP through the real client, on the fixture API server."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from conftest import watched
from helpers import detached
from test_watch import break_node, live_nodes, loop, outage_due_in, settings_for, stop, wait_until, watches

from rwo_failover.kube import Api, load_api_client
from rwo_failover.kube.cache import WatchedCluster
from rwo_failover.model import CONTROL_NAME, Cached, Fence, Node
from rwo_failover.run import runner
from rwo_failover.run.exitcodes import EXIT_OK, EXIT_REFUSED
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import Fault


def partition(api, nodes: int) -> None:
    """The first `nodes` live nodes stop heartbeating at once: the node lifecycle controller marks them
    Ready=Unknown (no shutdown taint: nobody says their machines are off)."""
    for i in range(nodes):
        api.add(fc.node(f"w{i}", ready="Unknown", since=1))


def test_a_lagging_node_watch_never_lets_a_pass_write_past_the_brake(api, kubeconfig):
    """Issue 25 item 1, as seen: the node watch holds its events back while 6 of 9 live nodes go NotReady (a
    partition); the pass that wakes when the tainted node becomes provably down must judge the brake on the
    server's 7 of 10 not Ready, not on its cache's 1 of 10, and write nothing."""
    outage_due_in(api, 5)
    for i in range(3, 9):
        fc.live_node(api, f"w{i}")
    api.inject(Fault("watch-lag", resource="nodes", delay=60, first=1))
    proc = loop(kubeconfig, WATCH_STALE_SECONDS="300", INTERVAL="120", MAX_UNHEALTHY_FRACTION="0.5")
    try:
        wait_until("the first node watch", lambda: [w for w in watches(api) if w.resource == "nodes"], timeout=20)
        partition(api, 6)
        # The dead node is provably down by the stamps 5 s after the start, and by the loop's own sighting of its
        # NotReady MIN_NOT_READY_SECONDS (10 s) after the loop first saw it: a wake pass has run by now.
        time.sleep(12)
    finally:
        logs = stop(proc)
    passes = [line for line in logs if line["message"] == "pass finished"]
    assert api.objects("pods"), "the pod was force-deleted on a cache that had not seen the partition"
    assert not [m for m in api.mutations() if not storm_or_event(m)], "nothing but Events and the storm is written"
    assert any(line.get("trigger") == "wake" for line in logs), "the outage must have woken a pass"
    assert passes[-1]["brake"] == "unhealthy-fraction" and passes[-1]["nodes_not_ready"] == 7, passes[-1]



def test_a_node_watch_that_has_caught_up_stands_in_for_the_live_node_list(api, kubeconfig):
    """A consistent read costs one item: the collection's version now (limit=1, no resourceVersion); once the
    node watch has applied an event or bookmark at or past it, its cache is the node list at that moment, and
    the pass that writes lists no nodes (50 MB at 5,000). A cache that lags never gets there (the test above)."""
    live_nodes(api, 3)
    api.bookmark_seconds = 0.1  # progress the watch hears without any node changing
    proc = loop(kubeconfig, INTERVAL="120")
    try:
        wait_until("the first node watch", lambda: [w for w in watches(api) if w.resource == "nodes"], timeout=20)
        time.sleep(1)
        started = len(api.requests)
        break_node(api)
        wait_until("the pod freed", lambda: not api.objects("pods"), timeout=20)
    finally:
        stop(proc)
    node_lists = [r for r in api.requests[started:] if r.verb == "list" and r.resource == "nodes"]
    assert node_lists and all(r.query.get("limit") == "1" and "resourceVersion" not in r.query
                              for r in node_lists), [r.query for r in node_lists]

# --- one pass from a cache frozen in the past: what it reads live, and when ----------------------------------

def frozen_cache(api, settings) -> Callable[[Api], Cached]:
    """The cluster as a watch cache holding it now would hand it to every later pass: it never moves again."""
    nodes = tuple(Node.from_json(n) for n in api.objects("nodes"))
    fences = tuple(Fence.from_json(f) for f in api.objects("networkfences"))
    return lambda _api: Cached(nodes, fences, (), ())


def one_pass(api, kubeconfig, cache, **env: str) -> tuple[int, list]:
    settings = settings_for(kubeconfig, **env)
    before = len(api.requests)
    code = runner.run_pass(Api(load_api_client(settings), settings), settings, cache=cache, sightings=watched())
    return code, api.requests[before:]


def storm_or_event(request) -> bool:
    """What a refused pass may write: Events, and the storm's moment in the control ConfigMap (issue 28's
    cool-down), never anything on a node, a pod or an attachment."""
    if request.resource == "events":
        return True
    named = request.path.rsplit("/", 1)[-1]
    if request.resource != "configmaps" or named not in ("configmaps", CONTROL_NAME):
        return False
    body = request.body if isinstance(request.body, dict) else json.loads(request.body)
    return named == CONTROL_NAME or body["metadata"]["name"] == CONTROL_NAME


def lists(requests: list, resource: str) -> list:
    return [r for r in requests if r.verb == "list" and r.resource == resource]


def test_a_cached_pass_with_nothing_to_write_judges_the_brakes_on_current_nodes_and_reads_nothing_more(api,
                                                                                                      kubeconfig):
    """Steady state stays cheap, and its brakes current (issue 36): a tainted node not yet down, judged with the
    cache's fences and records, costs its Lease, the clock's cross-check and the node list as of now: one
    consistent list when the cache cannot stand in for it (no nodes_now here), and no list of anything else."""
    live_nodes(api, 3)
    api.add(fc.node("slow", ready="Unknown", since=1, taints=[fc.SHUTDOWN]))
    api.add(fc.lease("slow", 100))
    code, requests = one_pass(api, kubeconfig, frozen_cache(api, settings_for(kubeconfig)))
    assert code == EXIT_OK
    assert [(r.resource, "resourceVersion" in r.query) for r in requests if r.verb == "list"] == [("nodes", False)]
    assert [r.name for r in requests if r.resource == "leases"] == ["slow"]


def test_a_cache_that_missed_a_storm_still_has_it_remembered(api, kubeconfig):
    """Item 3: the node watch never saw a partition (6 of 9 live nodes NotReady for a moment, during its lag), and
    the pass it would leave final writes nothing. Judged on the nodes as of now, the brake trips, and the storm is
    remembered (stormTrippedAt), as WATCH=false would: the cache decides when a pass runs, never what it
    remembers. The calm pass after refuses for the cool-down."""
    from test_storm_cooldown import data
    live_nodes(api, 9)
    api.add(fc.node("dead", ready="Unknown", since=1, taints=[fc.SHUTDOWN, fc.UNREACHABLE]))  # not down yet
    api.add(fc.lease("dead", 100))
    fc.add_volume(api, "data-db-0", attached_to="dead")
    api.add(fc.pod("db-0", "dead", claims=["data-db-0"], terminating=True))
    cache = frozen_cache(api, settings_for(kubeconfig))
    partition(api, 6)
    code, _ = one_pass(api, kubeconfig, cache, MAX_UNHEALTHY_FRACTION="0.5")
    assert code == EXIT_REFUSED and "stormTrippedAt" in data(api), "the storm, remembered"
    for i in range(6):  # the flap ends, and the dead node is proven down by now
        fc.live_node(api, f"w{i}")
    fc.dead_node(api, "dead")
    code, _ = one_pass(api, kubeconfig, cache, MAX_UNHEALTHY_FRACTION="0.5")
    assert code == EXIT_REFUSED and api.get("pods", "db-0", "default") is not None, "cooling down"


def test_a_cached_plan_that_writes_is_made_again_from_a_consistent_live_read(api, kubeconfig):
    """The node list (both brakes, MAX_NODES_PER_PASS), the fences and the recovery records are listed at the
    latest version (no resourceVersion: never the API server's watch cache), the Leases read after them."""
    fc.outage(api)
    fencing = {"FENCING": "networkfence", "NETWORK_FENCE_CLASS": "sim", "PASS_TIMEOUT_SECONDS": "3",
               "REQUEST_TIMEOUT_SECONDS": "2"}
    _, requests = one_pass(api, kubeconfig, frozen_cache(api, settings_for(kubeconfig, **fencing)), **fencing)
    for resource, label in (("nodes", ""), ("networkfences", ""), ("configmaps", "rwo-failover.io/recovery"),
                            ("configmaps", "rwo-failover.io/taint-record")):
        # configmaps: the recovery records and the taint records (by label); the control ConfigMap's read by name
        # is the pause's own
        found = [r for r in lists(requests, resource) if r.query.get("labelSelector", "") == label]
        # the nodes twice: as of now for the cached pass's brakes, and again just before it writes
        assert len(found) == (2 if resource == "nodes" else 1), (resource, label, found)
        assert all("resourceVersion" not in r.query for r in found), (resource, label, found)
    node_list = requests.index(lists(requests, "nodes")[-1])
    assert [r for r in requests[node_list:] if r.resource == "leases" and r.name == "dead"], "Leases after nodes"
    assert [r for r in api.mutations() if r.resource == "networkfences"], "the live plan still fences"


def test_a_cache_that_missed_a_partition_writes_nothing(api, kubeconfig):
    """The cache saw 1 of 10 nodes not Ready; the server has 7 of 10: the brake holds, judged live."""
    fc.outage(api, live=9)
    cache = frozen_cache(api, settings_for(kubeconfig))
    partition(api, 6)
    code, _ = one_pass(api, kubeconfig, cache, MAX_UNHEALTHY_FRACTION="0.5")
    assert code == EXIT_REFUSED
    assert api.objects("pods") and not [m for m in api.mutations() if not storm_or_event(m)]



def test_the_live_read_keeps_the_pods_and_attachments_it_just_read_live(api, kubeconfig):
    """One VolumeAttachment list a pass (the costliest read of an outage at scale), not two: the live read
    leads to no node the cached plan did not already read the pods of."""
    fc.outage(api)
    _, requests = one_pass(api, kubeconfig, frozen_cache(api, settings_for(kubeconfig)))
    assert len(lists(requests, "volumeattachments")) == 1 and len(lists(requests, "pods")) == 1
    # The nodes: as of now for the cached pass's brakes, and again just before it writes.
    assert len(lists(requests, "nodes")) == 2 and not api.objects("pods")


def test_the_live_read_reads_the_pods_of_a_node_the_cache_had_not_seen_down(api, kubeconfig):
    """The cache lags behind a second outage: the pass judges the nodes as of now anyway, finds it down too,
    and reads its pods once."""
    fc.outage(api)
    api.add(fc.node("late", ready="True", since=3600, taints=[]))
    api.add(fc.lease("late", 2))
    cache = frozen_cache(api, settings_for(kubeconfig))
    fc.dead_node(api, "late")
    fc.add_volume(api, "data-web-0", attached_to="late")
    api.add(fc.pod("web-0", "late", claims=["data-web-0"], terminating=True))
    code, requests = one_pass(api, kubeconfig, cache)
    assert code == EXIT_OK and not api.objects("pods") and not detached(api)
    assert sorted(r.query.get("fieldSelector") for r in lists(requests, "pods")) == \
        ["spec.nodeName=dead", "spec.nodeName=late"]

# --- item 7: a dead kubelet's last word is no alibi ---------------------------------------------------------

def test_a_pod_its_dead_kubelet_last_reported_ready_is_freed(api, run_pass):
    """The kubelet posted Ready=False with its pods still Running and Ready (a failed network plugin), the
    shutdown taint came, then the power went: the node lifecycle controller marks pods NotReady only when a node
    leaves Ready=True, so the pod still reads Running and Ready. On a proven-down node that is a dead kubelet's
    last word: its readiness is Unknown now, and it is freed like any stuck pod."""
    live_nodes(api, 3)
    fc.dead_node(api, "dead")
    _pvc, _pv, va = fc.add_volume(api, "data-db-0", attached_to="dead")
    api.add(fc.pod("db-0", "dead", claims=["data-db-0"], phase="Running", ready="True"))
    result = run_pass()
    assert result.code == EXIT_OK
    assert not api.objects("pods") and not detached(api), result.lines("skipped")
    [deleted] = result.lines("force-deleted pod")
    assert "NotReady" in deleted["reason"]


def test_what_a_dead_kubelet_last_reported_changes_no_other_rule(api, run_pass):
    """Completed pods stay never deleted; opt-outs, the namespace filters, STUCK_POD_STATES and the volume
    rules still decide."""
    live_nodes(api, 3)
    fc.dead_node(api, "dead")
    fc.add_volume(api, "data-done-0", attached_to="dead")
    api.add(fc.pod("done-0", "dead", claims=["data-done-0"], phase="Succeeded", ready="False"))
    fc.add_volume(api, "data-mine-0", attached_to="dead")
    api.add(fc.pod("mine-0", "dead", claims=["data-mine-0"], ready="True",
                   annotations={"rwo-failover.io/opt-out": "true"}))
    fc.add_volume(api, "shared", modes=("ReadWriteMany",), attached_to="dead")
    api.add(fc.pod("web-0", "dead", claims=["shared"], ready="True"))
    fc.add_volume(api, "data-db-0", attached_to="dead")
    api.add(fc.pod("db-0", "dead", claims=["data-db-0"], ready="True"))
    result = run_pass(STUCK_POD_STATES="Terminating,Unknown", OUT_OF_SERVICE_TAINT="never")
    assert {p["metadata"]["name"] for p in api.objects("pods")} == {"done-0", "mine-0", "web-0", "db-0"}
    reasons = {line["object"]: line["reason"] for line in result.lines("skipped") if line["kind"] == "pod"}
    assert reasons["default/db-0"].startswith("not stuck"), reasons
    result = run_pass(OUT_OF_SERVICE_TAINT="never")
    assert {p["metadata"]["name"] for p in api.objects("pods")} == {"done-0", "mine-0", "web-0"}
    reasons = {line["object"]: line["reason"] for line in result.lines("skipped") if line["kind"] == "pod"}
    assert reasons["default/done-0"].startswith("completed") and "opted out" in reasons["default/mine-0"]
    assert reasons["default/web-0"].startswith("mounts no exclusive volume"), reasons


def test_a_change_to_a_pod_on_a_down_node_wakes_a_pass(api, kubeconfig):
    """Nothing else wakes one: the down node no longer changes. With STUCK_POD_STATES=Terminating a Running pod on
    it is left alone until something deletes it (the taint manager's eviction, a human); that deletionTimestamp
    wakes a pass at once, not INTERVAL (120 s) later."""
    live_nodes(api, 3)
    fc.dead_node(api, "dead")
    fc.add_volume(api, "data-db-0", attached_to="dead")
    api.add(fc.pod("db-0", "dead", claims=["data-db-0"], ready="True"))
    proc = loop(kubeconfig, INTERVAL="120", STUCK_POD_STATES="Terminating", OUT_OF_SERVICE_TAINT="never",
                MIN_NOT_READY_SECONDS="1")
    try:
        wait_until("the first pass", lambda: watches(api), timeout=20)
        time.sleep(2)  # longer than MIN_NOT_READY_SECONDS: the loop's own sighting of the NotReady is over
        assert api.objects("pods"), "not stuck by the settings: left alone"
        api.add(fc.pod("db-0", "dead", claims=["data-db-0"], ready="True", terminating=True))
        marked = time.monotonic()
        wait_until("the pod freed", lambda: not api.objects("pods"), timeout=15)
        took = time.monotonic() - marked
    finally:
        logs = stop(proc)
    assert took < 3, f"{took:.1f}s after the pod on the down node changed, with INTERVAL=120"
    assert [line for line in logs if line["message"] == "pass triggered" and line["trigger"] == "change"
            and any("pods on dead" in change for change in line["changes"])]
    pod_watches = [w for w in watches(api) if w.resource == "pods"]
    assert pod_watches and all(w.query.get("fieldSelector") == "spec.nodeName=dead" for w in pod_watches)


def test_a_cache_ahead_of_the_server_never_stands_in_for_the_live_node_list(api, kubeconfig):
    """Found attacking issue 25: after an etcd restore to an earlier revision the server's version is below the
    cache's, and "the cache has reached the server's version" held at once: the frozen cache answered for the
    live node list (all 10 Ready) while the server had 7 of 10 NotReady, so both brakes were judged stale."""
    api.bookmark_seconds = 0.5
    live_nodes(api, 10)
    settings = settings_for(kubeconfig, WATCH_STALE_SECONDS="90")
    client = load_api_client(settings)
    cluster = WatchedCluster(lambda: Api(client, settings), settings, lambda _why: None)
    cluster.start()
    try:
        cluster.view(Api(client, settings))
        nodes = cluster.reflectors["nodes"]
        live_nodes(api, 10)  # heartbeats: the versions move on, and the cache follows
        wait_until("the cache at the server's version", lambda: nodes.version == str(api.resource_version),
                   timeout=10)
        with api.lock:
            api.resource_version -= 15  # etcd restored from an earlier snapshot
        for i in range(7):
            fc.dead_node(api, f"w{i}")
        assert cluster.nodes_now(Api(client, settings)) is None, "the pass must list the nodes itself"
    finally:
        cluster.stop()


def test_a_cached_plan_whose_only_work_the_brakes_do_not_count_is_still_made_again_live(api, kubeconfig):
    """Every planned write is under the brakes, counted or not. The watch of the control ConfigMap has not seen the
    storm this loop just recorded; the one proven-down node holds only work no brake counts (a pod its kubelet
    never ran, no attachment). The cached plan would free it inside the cool-down; the live plan refuses, as
    WATCH=false does."""
    fc.dead_node(api, "dead")
    fc.add_volume(api, "data-db-0")
    api.add(fc.pod("db-0", "dead", claims=["data-db-0"], terminating=True, kubelet_ran=False, phase="Pending"))
    live_nodes(api, 3)
    cache = frozen_cache(api, settings_for(kubeconfig))  # holds no control object: the storm is not in it
    tripped = (datetime.now(UTC) - timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    api.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONTROL_NAME, "namespace": "rwo-failover"},
             "data": {"stormTrippedAt": tripped}})
    for source in (cache, None):  # the cached pass, then one with no cache at all (WATCH=false)
        code, _ = one_pass(api, kubeconfig, source)
        assert code == EXIT_REFUSED, "the cool-down, read live"
        assert api.get("pods", "db-0", "default") is not None
        assert not [m for m in api.mutations() if not storm_or_event(m)], "nothing but Events and the storm is written"
