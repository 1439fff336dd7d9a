"""Issue 25 attack (loops and back-off): the back-off gate resets after a healthy watch, "one that ran at least
SHORT_WATCH_SECONDS" (kube/backoff.py). A watch that ran well and was then cut (a load balancer or proxy that
ends long connections, an API server restarting) was counted as one more failure in a row, so the waits kept
doubling: after a few such cuts the cache stood still 6 to 45 s after each one, while nothing was wrong."""

from __future__ import annotations

import logging
import time

from test_watch import settings_for, wait_until

from rwo_failover.kube import Api, load_api_client
from rwo_failover.kube.cache import WatchedCluster
from rwo_failover.run.metrics import Metrics
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import Fault


def test_watches_cut_after_running_well_do_not_grow_the_back_off(api, kubeconfig, caplog):
    caplog.set_level(logging.INFO, logger="rwo_failover")
    api.bookmark_seconds = 0.5
    fc.live_node(api, "a")
    cuts = api.inject(Fault("watch-drop", resource="nodes", delay=1.5))  # every node watch, after 1.5 s
    settings = settings_for(kubeconfig, WATCH_STALE_SECONDS="90")
    api_client = load_api_client(settings)
    cluster = WatchedCluster(lambda: Api(api_client, settings), settings, lambda _why: None, Metrics())
    cluster.start()
    try:
        cluster.view(Api(api_client, settings))
        nodes = cluster.reflectors["nodes"]
        # `fired` counts the watches the fault hit: the fifth is open once four were cut.
        wait_until("four watches cut after running 1.5 s each", lambda: cuts.fired >= 5, timeout=40)
        time.sleep(1.7)  # the fifth is cut too
        changed = time.monotonic()
        fc.live_node(api, "c")
        wait_until("the node changed after the fifth cut, seen", lambda: "c" in nodes.items, timeout=30)
        took = time.monotonic() - changed
        assert took < 0.8 * 1.5 + 1.5, f"{took:.1f}s: each cut waited longer than the last"
        failing = [r for r in caplog.records if r.getMessage() == "watch failing; backing off"]
        assert len(failing) == 1, "five cuts for the same reason: logged once per change of state, not per cut"
    finally:
        cluster.stop()
