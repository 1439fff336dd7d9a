"""Continuous mode's watches under the faults an outside review of issue 20 found (each failed before its fix):
a watch error that is not 410, a setting too large for a socket, a watch thread that outlives stop(), and a
SIGTERM while watch opens hang."""

from __future__ import annotations

import json
import signal
import threading
import time

from test_watch import break_node, live_nodes, loop, settings_for, stop, wait_until, watches

from rwo_failover.kube import Api, load_api_client
from rwo_failover.kube.cache import WatchedCluster
from rwo_testkit.fake_apiserver import Response

BAD_BOOKMARK = (b'{"type":"BOOKMARK","object":{"kind":"Node","apiVersion":"v1",'
                b'"metadata":{"resourceVersion":"garbage"}}}\n')


def test_a_watch_error_that_is_not_410_lists_again_before_it_resumes(api, kubeconfig):
    """A bookmark with a version the server cannot parse makes every resume from it fail (400): as client-go's
    reflector, the watch lists again after an error, instead of resuming blind until the cache looks stale."""
    live_nodes(api, 3)
    served = []

    def bad_bookmark(req):
        if req.verb == "watch" and req.resource == "nodes" and not served:
            served.append(req)
            return Response(200, b"", {"Content-Type": "application/json"}, stream=iter([BAD_BOOKMARK]))
        return None
    api.hooks.append(bad_bookmark)
    proc = loop(kubeconfig, INTERVAL="600", WATCH_STALE_SECONDS="300")
    try:
        wait_until("the bad bookmark served", lambda: served, timeout=20)
        wait_until("a node list after the error", lambda: [r for r in api.requests if r.verb == "list"
                                                          and r.resource == "nodes" and r.at > served[0].at],
                   timeout=20)
        break_node(api)
        wait_until("the pod freed", lambda: not api.objects("pods"), timeout=30)
    finally:
        logs = stop(proc)
    garbage = [r for r in watches(api) if r.query.get("resourceVersion") == "garbage"]
    assert len(garbage) == 1, "one failed resume, then a list: never a resume from the same bad version again"
    assert [line for line in logs if line["message"] == "listed" and line.get("reason") == "error"]
    triggers = [line.get("trigger") for line in logs if line["message"] == "pass triggered"]
    assert "interval" not in triggers, "the outage was seen by the watch, not found by an interval pass"


def test_a_watch_thread_that_outlives_stop_ends_instead_of_running_beside_the_next(api, kubeconfig):
    """Watch opens the API server has not answered: stop()'s join gives up on the blocked thread, and leadership
    comes back. The old thread keeps its own stop event and ends when it wakes: one watch thread a collection."""
    live_nodes(api, 2)
    hold = threading.Event()

    def hang(req):
        if req.verb == "watch" and not hold.is_set():
            hold.wait(25)
        return None
    api.hooks.append(hang)
    settings = settings_for(kubeconfig, WATCH_STALE_SECONDS="90")
    api_client = load_api_client(settings)
    cluster = WatchedCluster(lambda: Api(api_client, settings), settings, lambda _reason: None)
    cluster.start()
    cluster.view(Api(api_client, settings))
    time.sleep(1)
    cluster.stop()  # leadership lost
    cluster.start()  # and regained
    cluster.view(Api(api_client, settings))
    hold.set()
    try:
        wait_until("one watch thread a collection", lambda: len(
            [t for t in threading.enumerate() if t.name.startswith("watch-") and t.is_alive()]) ==
            len(cluster.reflectors), timeout=15)
    finally:
        cluster.stop()


def test_sigterm_releases_the_leader_lease_before_waiting_for_watch_threads(api, kubeconfig):
    """The standby takes over at once on SIGTERM: the Lease is released first, then the watches are stopped
    (each join may wait up to 10 s for a thread blocked in a read)."""
    live_nodes(api, 2)
    hold, opened = threading.Event(), []

    def hang(req):
        if req.verb == "watch" and not hold.is_set():
            opened.append(req)
            hold.wait(40)
        return None
    api.hooks.append(hang)
    proc = loop(kubeconfig, LEADER_ELECTION="true", INTERVAL="30")
    try:
        wait_until("both watch opens pending", lambda: len(opened) >= 2, timeout=30)
        proc.send_signal(signal.SIGTERM)
        wait_until("the Lease released", lambda: not (api.get("leases", "rwo-failover-leader", "rwo-failover")
                                                        or {}).get("spec", {}).get("holderIdentity"), timeout=8)
        out, _ = proc.communicate(timeout=90)
    finally:
        hold.set()
    messages = [json.loads(line)["message"] for line in out.splitlines()]
    assert "leader election: released the Lease" in messages and proc.returncode == 0
