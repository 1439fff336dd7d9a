"""Watch-driven continuous mode (issue 20): the fixture's watches, the reflector under watch faults, and the
triggered loop, over HTTP through the real client."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable

import pytest
from conftest import ROOT
from helpers import detached
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from rwo_failover import settings as config
from rwo_failover.kube import Api, load_api_client
from rwo_failover.kube.reflector import Reflector
from rwo_failover.kube.sources import NODES, RECOVERY_RECORDS
from rwo_failover.model import RECOVERY_LABEL, Unreadable
from rwo_failover.run.exitcodes import EXIT_OK
from rwo_failover.run.metrics import Metrics
from rwo_testkit import fake_cluster as fc
from rwo_testkit.control_plane import free_port
from rwo_testkit.fake_apiserver import Fault


def settings_for(kubeconfig: str, **env: str):
    return config.load(["--interval", "5"], {"KUBECONFIG": kubeconfig, "WATCH_STALE_SECONDS": "5", **env})[1]


@pytest.fixture
def make_api(kubeconfig):
    settings = settings_for(kubeconfig)
    api_client = load_api_client(settings)
    return lambda: Api(api_client, settings)


def wait_until(what: str, check: Callable[[], object], timeout: float = 10) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


# --- the fixture's watch, as kube-apiserver serves it ---------------------------------------------------

def collect(make_api, version: str, timeout: int = 2, **kwargs) -> list[dict]:
    return list(make_api().watch("nodes", "/api/v1/nodes", version, timeout_seconds=timeout,
                                 watcher=k8s_watch.Watch(), **kwargs))


def test_a_watch_streams_changes_after_the_version_asked_then_ends_at_its_timeout(api, make_api):
    api.bookmark_seconds = 0.5
    fc.live_node(api, "a")
    start = api.resource_version

    def change() -> None:
        time.sleep(0.2)
        api.add(fc.node("b"))
        api.add(fc.node("a", ready="False"))
        api.remove("nodes", "b")
    threading.Thread(target=change).start()
    began = time.monotonic()
    events = collect(make_api, str(start), timeout=3)
    assert 2.5 < time.monotonic() - began < 5, "ends at timeoutSeconds"
    changes = [(e["type"], e["raw_object"]["metadata"].get("name")) for e in events if e["type"] != "BOOKMARK"]
    assert changes == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    versions = [int(e["raw_object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions) and versions[0] > start
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks and bookmarks[-1]["raw_object"]["metadata"]["resourceVersion"] == str(api.resource_version)


def test_a_watch_from_version_0_starts_with_every_object(api, make_api):
    fc.live_node(api, "a")
    fc.live_node(api, "b")
    events = collect(make_api, "0", timeout=1)
    assert [(e["type"], e["raw_object"]["metadata"]["name"]) for e in events if e["type"] != "BOOKMARK"] == \
        [("ADDED", "a"), ("ADDED", "b")]


def test_a_version_older_than_the_retained_history_is_410_gone(api, make_api):
    fc.live_node(api, "a")
    old = str(api.resource_version)
    fc.live_node(api, "b")
    api.compact("nodes")
    with pytest.raises(ApiException) as err:
        collect(make_api, old)
    assert err.value.status == 410 and "too old resource version" in err.value.reason


def test_the_empty_watch_fault_answers_200_and_ends_at_once(api, make_api):
    fc.live_node(api, "a")
    api.inject(Fault("watch-empty", resource="nodes"))
    began = time.monotonic()
    assert collect(make_api, str(api.resource_version), timeout=5) == []
    assert time.monotonic() - began < 1


def test_the_behind_fault_delivers_changes_late_and_bookmarks_only_what_it_delivered(api, make_api):
    """A lagging stream that still looks alive: its bookmarks carry the version it delivered, not the server's."""
    api.bookmark_seconds = 0.3
    fc.live_node(api, "a")
    start = api.resource_version
    api.inject(Fault("watch-behind", resource="nodes", delay=1.5))

    def change() -> None:
        time.sleep(0.2)
        api.add(fc.node("b"))
    threading.Thread(target=change).start()
    began = time.monotonic()
    events = [(e, time.monotonic() - began) for e in
              make_api().watch("nodes", "/api/v1/nodes", str(start), timeout_seconds=3, watcher=k8s_watch.Watch())]
    seen = [(e["type"], round(t, 1)) for e, t in events]
    added = [t for kind, t in seen if kind == "ADDED"]
    assert added and added[0] >= 1.5, f"the change arrives about 1.5 s late: {seen}"
    early = [e for e, t in events if e["type"] == "BOOKMARK" and t < 1.5]
    assert early and all(e["raw_object"]["metadata"]["resourceVersion"] == str(start) for e in early), \
        "bookmarks before the late change stay at the version the stream started from"


def record_map(name: str, labels: dict) -> dict:
    """A ConfigMap in RECOVERY_NAMESPACE, as a recovery record is kept (its content does not matter here)."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "rwo-failover",
                                                                   "labels": labels}, "data": {"record": "{}"}}


def test_watch_selectors_turn_transitions_into_added_and_deleted(api, make_api):
    record = api.add(record_map("r", {}))
    start = str(api.resource_version)
    labelled = dict(record, metadata=dict(record["metadata"], labels={RECOVERY_LABEL: "pending"}))
    api.add(labelled)
    api.add(dict(labelled, metadata=dict(labelled["metadata"], labels={})))
    events = list(make_api().watch_recovery_records("rwo-failover", RECOVERY_LABEL, start, timeout_seconds=1,
                                                       watcher=k8s_watch.Watch()))
    assert [e["type"] for e in events if e["type"] != "BOOKMARK"] == ["ADDED", "DELETED"]


# --- the reflector, under watch faults --------------------------------------------------------------------

class Changes(list):
    def __call__(self, reason: str) -> None:
        self.append(reason)


@pytest.fixture
def reflector(api, kubeconfig):
    made = []

    def make(source=NODES, **env: str) -> tuple[Reflector, Changes, Metrics]:
        settings = settings_for(kubeconfig, **env)
        api_client = load_api_client(settings)
        changes, metrics = Changes(), Metrics()
        found = Reflector(source, lambda: Api(api_client, settings), settings, on_change=changes,
                          metrics=metrics)
        made.append(found)
        return found, changes, metrics
    yield make
    for found in made:
        found.stop()


def count(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(f"rwo_failover_{name}_total", labels) or 0.0


def api_of(found: Reflector) -> Api:
    return found.new_api()


def started(found: Reflector) -> Reflector:
    """Started as the loop starts it: the watch thread, then the first pass's list."""
    found.start()
    found.current(found.new_api())
    return found


def watches(api) -> list:
    return [r for r in api.requests if r.verb == "watch"]


def test_the_reflector_lists_then_follows_changes_that_matter_and_ignores_heartbeats(api, reflector):
    fc.live_node(api, "a")
    found, changes, metrics = reflector()
    found.start()
    found.current(api_of(found))  # the first list is the first pass's
    wait_until("the first watch", lambda: watches(api))
    assert [r.query.get("resourceVersion") for r in api.requests if r.verb == "list"] == ["0"], \
        "the first list may come from the watch cache"
    beat = api.get("nodes", "a")  # a status post: only the heartbeat time moves, nothing a pass judges
    for condition in beat["status"]["conditions"]:
        condition["lastHeartbeatTime"] = fc.stamp(0)
    api.add(beat)
    fc.dead_node(api, "b")
    wait_until("the new node", lambda: "b" in found.items)
    time.sleep(0.3)
    assert changes == ["nodes b added"], "a heartbeat triggers nothing"
    assert count(metrics, "watch_events", resource="nodes", type="ADDED") == 1
    assert count(metrics, "watch_events", resource="nodes", type="MODIFIED") >= 1
    api.add(fc.node("a", ready="False", since=1))
    wait_until("the NotReady node", lambda: found.items["a"].ready == "False")
    assert changes[-1] == "nodes a modified"


def test_only_taints_that_can_change_a_verdict_start_a_pass(api, reflector):
    """An autoscaler's or a problem detector's taint on a healthy node changes no verdict: at 5,000 nodes each
    pass it started cost about 40 ms, a pass a second while it flapped (bench/storms.py). A shutdown taint does
    start one, and on a node that carries one, any other taint too: liveness times the taints' last write."""
    fc.live_node(api, "a")
    found, changes, _ = reflector()
    started(found)
    wait_until("the first watch", lambda: watches(api))
    other = {"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}

    def tainted(*taints: dict) -> None:  # the same node, only its taints changed
        node = api.get("nodes", "a")
        node["spec"]["taints"] = list(taints)
        api.add(node)
    tainted(other)
    wait_until("the tainted node", lambda: found.items["a"].taints)
    tainted()
    wait_until("the untainted node", lambda: not found.items["a"].taints)
    time.sleep(0.3)
    assert changes == [], "another taint on a healthy node starts no pass"
    tainted(fc.SHUTDOWN)
    wait_until("the shutdown taint", lambda: changes == ["nodes a modified"])
    tainted(fc.SHUTDOWN, other)
    wait_until("another taint on a node tainted for shutdown", lambda: len(changes) == 2)


def test_a_dropped_watch_resumes_from_the_last_version_without_listing_again(api, reflector):
    fc.live_node(api, "a")
    api.inject(Fault("watch-drop", resource="nodes", delay=0.3, first=1))
    found, changes, metrics = reflector()
    started(found)
    wait_until("a second watch", lambda: len(watches(api)) >= 2)
    fc.dead_node(api, "b")
    wait_until("the node added after the drop", lambda: "b" in found.items)
    first, second = watches(api)[:2]
    assert first.fault == "watch-drop" and int(second.query["resourceVersion"]) >= int(first.query["resourceVersion"])
    assert [r.verb for r in api.requests].count("list") == 1, "a drop resumes the watch; it does not relist"
    assert count(metrics, "watch_restarts", resource="nodes", reason="dropped") == 1


def test_410_gone_relists_the_latest_state_and_watches_from_there(api, reflector):
    fc.live_node(api, "a")
    api.inject(Fault("watch-gone", resource="nodes", first=1))
    found, _changes, metrics = reflector()
    started(found)
    wait_until("a watch after the relist", lambda: len(watches(api)) >= 2)
    lists = [r for r in api.requests if r.verb == "list"]
    assert len(lists) == 2 and "resourceVersion" not in lists[1].query, \
        "after 410, the reflector lists the latest state, not the watch cache's"
    assert count(metrics, "relists", resource="nodes", reason="expired") == 1
    fc.dead_node(api, "b")
    wait_until("the node added after the relist", lambda: "b" in found.items)


def test_a_lagging_watch_is_never_decided_from(api, reflector, make_api):
    """The stream stays open but says nothing: a pass must list afresh before deciding, and the node that
    went down meanwhile is seen."""
    fc.live_node(api, "a")
    api.bookmark_seconds = 0.5
    api.inject(Fault("watch-lag", resource="nodes", delay=60, first=1))
    found, _changes, metrics = reflector()
    started(found)
    wait_until("the lagging watch", lambda: watches(api))
    fc.dead_node(api, "b")
    time.sleep(0.5)
    assert "b" not in found.items, "the lagging stream delivered nothing"
    found.heard_at = found.monotonic() - 6  # as it would be after WATCH_STALE_SECONDS=5 of silence
    names = {n.name for n in found.current(make_api())}
    assert "b" in names and count(metrics, "relists", resource="nodes", reason="stale") == 1


def test_a_silent_stream_times_out_and_relists_by_itself(api, reflector):
    fc.live_node(api, "a")
    api.inject(Fault("watch-lag", resource="nodes", delay=60, first=1))
    found, _changes, metrics = reflector()
    started(found)
    fc.dead_node(api, "b")
    wait_until("the relist after 5 s of silence", lambda: "b" in found.items, timeout=15)
    assert count(metrics, "watch_restarts", resource="nodes", reason="stalled") == 1
    assert count(metrics, "relists", resource="nodes", reason="stale") == 1


def test_a_periodic_relist_replaces_everything(api, reflector):
    fc.live_node(api, "a")
    found, changes, metrics = reflector(RELIST_SECONDS="30")
    started(found)
    wait_until("the watch", lambda: watches(api))
    found.listed_at -= 31
    api.drop_watches()
    wait_until("the periodic relist", lambda: count(metrics, "relists", resource="nodes", reason="periodic") == 1)


def test_recovery_records_are_watched_by_their_label_in_their_namespace(api, reflector):
    found, changes, _metrics = reflector(RECOVERY_RECORDS)
    started(found)
    wait_until("the watch", lambda: watches(api))
    assert watches(api)[0].query["labelSelector"] == RECOVERY_LABEL
    assert watches(api)[0].namespace == "rwo-failover"
    elsewhere = record_map("elsewhere", {RECOVERY_LABEL: "pending"})
    elsewhere["metadata"]["namespace"] = "default"
    api.add(elsewhere)
    api.add(record_map("r", {RECOVERY_LABEL: "pending"}))
    wait_until("the record", lambda: "rwo-failover/r" in found.items)
    assert changes == ["recovery records rwo-failover/r added"], "a tenant's look-alike elsewhere is not ours"


def test_a_watched_object_that_cannot_be_read_is_skipped_with_its_reason_never_kept_stale(api, reflector):
    """As in a list (model.Reader): the bad object is an Unreadable; its older, readable copy is not kept, so
    no pass judges a node from what it was before it became unreadable."""
    fc.live_node(api, "a")
    found, changes, _metrics = reflector()
    started(found)
    wait_until("the watch", lambda: watches(api))
    bad = api.get("nodes", "a")
    bad["spec"]["taints"] = "not a list"
    api.add(bad)
    wait_until("the unreadable node", lambda: isinstance(found.items.get("a"), Unreadable))
    assert found.items["a"].kind == "node" and "taints" in found.items["a"].reason
    assert changes == ["nodes a modified"]


# --- the triggered loop -------------------------------------------------------------------------------

def loop(kubeconfig: str, **env: str) -> subprocess.Popen:
    full = {"KUBECONFIG": kubeconfig, "PATH": "/usr/bin:/bin", "LOG_FORMAT": "json", "INTERVAL": "30",
            "METRICS_PORT": "0", "MIN_NOT_READY_SECONDS": "10", **env}
    return subprocess.Popen([sys.executable, str(ROOT / "reconcile.py")], cwd=ROOT, env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stop(proc: subprocess.Popen) -> list[dict]:
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_OK, err[-3000:]
    return [json.loads(line) for line in out.splitlines()]


def live_nodes(api, count: int) -> None:
    for i in range(count):
        fc.live_node(api, f"w{i}")


def break_node(api) -> None:
    """A dead, tainted node holding a stuck StatefulSet pod with an attached RWO claim."""
    fc.dead_node(api, "dead")
    fc.add_volume(api, "data-db-0", attached_to="dead")
    api.add(fc.pod("db-0", "dead", claims=["data-db-0"], terminating=True))


def outage_due_in(api, seconds: float) -> None:
    """Live nodes, and a tainted node that becomes provably down `seconds` from now (MIN_NOT_READY_SECONDS=10:
    NotReady 10 - seconds ago, Lease unrenewed for longer than 40 s)."""
    live_nodes(api, 3)
    api.add(fc.node("dead", ready="Unknown", since=10 - seconds, taints=[fc.SHUTDOWN, fc.UNREACHABLE]))
    api.add(fc.lease("dead", 100))
    fc.add_volume(api, "data-db-0", attached_to="dead")
    api.add(fc.pod("db-0", "dead", claims=["data-db-0"], terminating=True))


@pytest.mark.parametrize("watch", ["true", "false"])
def test_a_node_becoming_provably_down_is_acted_on_within_a_second(api, kubeconfig, watch):
    """Time alone makes the node down; the watch-driven loop wakes for that moment (Plan.wake_at) instead
    of waiting out INTERVAL. With WATCH=false (the old loop) the same outage waits for the next pass. The loop
    runs before the node goes NotReady, as a leader does: its own sighting of the verdict (observe/sightings.py)
    starts when the verdict is written, and ends with the server's NotReady wait."""
    live_nodes(api, 3)
    api.add(fc.node("dead", ready="True", since=3600))
    api.add(fc.lease("dead", 100))
    fc.add_volume(api, "data-db-0", attached_to="dead")
    api.add(fc.pod("db-0", "dead", claims=["data-db-0"], terminating=True))
    proc = loop(kubeconfig, WATCH=watch, INTERVAL="8", MIN_NOT_READY_SECONDS="4")
    try:
        wait_until("the first pass", lambda: [r for r in api.requests if r.resource == "nodes"], timeout=20)
        time.sleep(1)
        api.add(fc.node("dead", ready="Unknown", since=0, taints=[fc.SHUTDOWN, fc.UNREACHABLE]))
        due = time.monotonic() + 4 + 1  # the stamp's truncated second counts from its end
        wait_until("a write", lambda: api.mutations(), timeout=20)
        late = time.monotonic() - due
    finally:
        logs = stop(proc)
    if watch == "false":
        assert late > 2, "the polling loop passes every INTERVAL"
        return
    assert late < 2.0, f"acted {late:.2f}s after the node became provably down"  # Date has 1 s resolution
    assert any(line.get("trigger") == "wake" for line in logs)


def running_loop(api, kubeconfig: str, nodes: int = 3, **env: str) -> subprocess.Popen:
    """Live nodes, and node `dead` NotReady for long (unreachable, no shutdown taint yet), and the loop started on
    them, its first pass done (it has seen `dead` NotReady) and its watches open."""
    live_nodes(api, nodes)
    api.add(fc.node("dead", ready="Unknown", since=600, taints=[fc.UNREACHABLE]))
    api.add(fc.lease("dead", 640))
    proc = loop(kubeconfig, **{"MIN_NOT_READY_SECONDS": "1", **env})
    wait_until("the first pass", lambda: watches(api), timeout=20)
    time.sleep(1.5)  # the loop has now seen `dead` NotReady for longer than MIN_NOT_READY_SECONDS itself
    return proc


def shut_down(api) -> None:
    """The cloud taints the NotReady node `dead` shut down; a stuck StatefulSet pod with an attached RWO claim is on
    it."""
    node = api.get("nodes", "dead")
    node["spec"]["taints"] = node["spec"].get("taints", []) + [fc.SHUTDOWN]
    fc.add_volume(api, "data-db-0", attached_to="dead")
    api.add(fc.pod("db-0", "dead", claims=["data-db-0"], terminating=True))
    api.add(node)


def test_a_node_tainted_between_passes_triggers_a_pass_at_once(api, kubeconfig):
    proc = running_loop(api, kubeconfig)
    try:
        shut_down(api)
        tainted = time.monotonic()
        wait_until("the pod freed", lambda: not api.objects("pods"), timeout=20)
        took = time.monotonic() - tainted
    finally:
        logs = stop(proc)
    assert took < 3, f"{took:.1f}s with INTERVAL=30"
    assert any(line.get("trigger") == "change" for line in logs)


def test_a_burst_of_changes_is_one_pass(api, kubeconfig):
    proc = running_loop(api, kubeconfig, nodes=20)
    try:
        for i in range(20):  # a mass outage: every node NotReady at once
            api.add(fc.node(f"w{i}", ready="Unknown", since=1))
        time.sleep(2)
    finally:
        logs = stop(proc)
    triggered = [line for line in logs if line["message"] == "pass triggered" and line["trigger"] == "change"]
    assert len(triggered) == 1 and len(triggered[0]["changes"]) == 20


@pytest.mark.parametrize("fault", ["watch-drop", "watch-lag", "watch-gone"])
def test_the_loop_fails_over_through_watch_faults(api, kubeconfig, fault):
    live_nodes(api, 3)
    api.bookmark_seconds = 1
    api.inject(Fault(fault, resource="nodes", delay=1 if fault == "watch-drop" else 60, first=2))
    proc = loop(kubeconfig, WATCH_STALE_SECONDS="5")
    try:
        wait_until("the first watch", lambda: watches(api), timeout=20)
        time.sleep(1.5)
        break_node(api)
        wait_until("the pod freed", lambda: not api.objects("pods"), timeout=30)
    finally:
        logs = stop(proc)
    assert detached(api) == []
    assert all(line["exit_code"] == EXIT_OK for line in logs if line["message"] == "pass finished")


def test_a_fence_answering_triggers_a_pass_at_once(api, kubeconfig):
    fc.outage(api)
    proc = loop(kubeconfig, FENCING="networkfence", NETWORK_FENCE_CLASS="sim", FENCED_MIN_NOT_READY_SECONDS="10")
    try:
        fence = wait_until("our NetworkFence", lambda: api.objects("networkfences"), timeout=20)[0]  # type: ignore[index]  # wait_until returns what the lambda gave
        time.sleep(1)
        fence["status"] = {"result": "Succeeded", "message": "fencing operation successful", "conditions": [
            {"type": "Fenced", "status": "True", "observedGeneration": fence["metadata"]["generation"]}]}
        api.add(fence)
        answered = time.monotonic()
        wait_until("the pod freed", lambda: not api.objects("pods"), timeout=20)
        took = time.monotonic() - answered
    finally:
        stop(proc)
    assert took < 2, f"{took:.1f}s after the fence answered, with INTERVAL=30"


def test_readyz_fails_while_a_watch_is_behind(api, kubeconfig):
    fc.live_node(api, "a")
    api.bookmark_seconds = 1
    port = free_port()
    proc = loop(kubeconfig, METRICS_PORT=str(port), WATCH_STALE_SECONDS="5")

    def probe(path: str) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as answer:
                return answer.status
        except urllib.error.HTTPError as err:
            return err.code
        except OSError:
            return 0
    try:
        wait_until("ready", lambda: probe("/readyz") == 200, timeout=20)
        api.inject(Fault("watch-lag", resource="nodes", delay=60))
        api.drop_watches()  # the next stream lags
        wait_until("not ready while behind", lambda: probe("/readyz") == 503, timeout=15)
        assert probe("/healthz") == 200, "behind is not stuck: the watch thread itself is alive"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as answer:
            text = answer.read().decode()
        assert 'rwo_failover_watch_cache_age_seconds{resource="nodes"}' in text
    finally:
        stop(proc)


def test_a_standby_keeps_no_watch_and_lists_once_it_leads(api, kubeconfig):
    """Cold standby: only the leader watches; the standby starts its watches (with a list) once it leads."""
    live_nodes(api, 3)
    leader = loop(kubeconfig, LEADER_ELECTION="true", INTERVAL="5")
    try:
        # Nodes, recovery records, taint records and the control ConfigMap (the pause switch).
        wait_until("the leader's watches", lambda: len(watches(api)) == 4, timeout=30)
        standby = loop(kubeconfig, LEADER_ELECTION="true", INTERVAL="5")
        try:
            time.sleep(3)
            assert len(watches(api)) == 4, "the standby opened no watch"
            def node_lists() -> int:  # the watch cache's own lists (at version 0); a pass's are consistent
                return len([r for r in api.requests if r.verb == "list" and r.resource == "nodes"
                            and r.query.get("resourceVersion") == "0"])
            lists_before = node_lists()
            stop(leader)  # releases the Lease: the standby leads at once
            wait_until("the new leader's watches", lambda: len(watches(api)) == 8, timeout=30)
            assert node_lists() == lists_before + 1
        finally:
            stop(standby)
    finally:
        if leader.poll() is None:
            stop(leader)


def test_a_stuck_watch_thread_fails_healthz(api, kubeconfig):
    from rwo_failover.kube.cache import WatchedCluster

    settings = settings_for(kubeconfig)
    cluster = WatchedCluster(lambda: Api(load_api_client(settings), settings), settings, Changes())
    cluster.running = True
    assert cluster.stuck() is None
    cluster.reflectors["nodes"].alive_at -= 2 * settings.watch_stale_seconds + settings.request_timeout_seconds + 1
    assert "the nodes watch has not moved" in (cluster.stuck() or "")
