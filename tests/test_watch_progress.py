"""Issue 25, item 2: a watch cache is judged by whether its resourceVersion keeps up with the server's, not by
whether bytes arrive. A node watch that keeps bookmarking the version it started from (the fixture's
"watch-behind" fault with a long delay) kept the cache "fresh" forever."""

from __future__ import annotations

import time

from test_watch import settings_for, wait_until

from rwo_failover.kube import Api, load_api_client
from rwo_failover.kube.cache import WatchedCluster
from rwo_failover.run.metrics import Metrics
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import Fault


def relists(metrics: Metrics, reason: str) -> float:
    return metrics.registry.get_sample_value("rwo_failover_relists_total",
                                             {"resource": "nodes", "reason": reason}) or 0.0


def test_bookmarks_without_progress_are_found_out_listed_afresh_and_counted(api, kubeconfig):
    api.bookmark_seconds = 0.5
    fc.live_node(api, "a")
    api.inject(Fault("watch-behind", resource="nodes", delay=3600))
    settings = settings_for(kubeconfig, WATCH_STALE_SECONDS="5")
    api_client = load_api_client(settings)
    metrics = Metrics()
    cluster = WatchedCluster(lambda: Api(api_client, settings), settings, lambda _why: None, metrics)
    cluster.start()
    try:
        cluster.view(Api(api_client, settings))
        nodes = cluster.reflectors["nodes"]
        fc.dead_node(api, "b")
        began = time.monotonic()
        time.sleep(2)
        assert "b" not in nodes.items and nodes.age() < 1, "bookmarks keep coming; the change does not"
        wait_until("the node that died, seen without a pass", lambda: "b" in nodes.items, timeout=15)
        assert time.monotonic() - began < 5 + 5 / 2 + 3, "within WATCH_STALE_SECONDS and a probe's period"
        assert relists(metrics, "no_progress") == 1
        probes = [r for r in api.requests if r.verb == "list" and r.query.get("limit") == "1"]
        assert probes and all("resourceVersion" not in r.query for r in probes), "consistent reads"
    finally:
        cluster.stop()


def test_readyz_fails_while_the_cache_has_not_reached_the_servers_version(api, kubeconfig):
    """Heard from a moment ago, yet behind a version the server had WATCH_STALE_SECONDS ago: not ready, and the
    next pass lists afresh first."""
    api.bookmark_seconds = 0.5
    fc.live_node(api, "a")
    api.inject(Fault("watch-behind", resource="nodes", delay=3600))
    settings = settings_for(kubeconfig, WATCH_STALE_SECONDS="90")  # the probe thread stays out of it
    api_client = load_api_client(settings)
    metrics = Metrics()
    cluster = WatchedCluster(lambda: Api(api_client, settings), settings, lambda _why: None, metrics)
    cluster.start()
    try:
        cluster.view(Api(api_client, settings))
        nodes = cluster.reflectors["nodes"]
        fc.dead_node(api, "b")
        time.sleep(1)
        assert cluster.behind() is None
        nodes.progress.probed(str(api.resource_version), nodes.monotonic() - 91)  # as a probe 91 s ago
        assert nodes.age() < 1
        assert "not making progress" in (cluster.behind() or "")
        assert "b" in {n.name for n in cluster.view(Api(api_client, settings)).nodes}
        assert relists(metrics, "no_progress") == 1 and cluster.behind() is None
    finally:
        cluster.stop()


def test_progress_judges_versions_only_when_they_are_numbers_and_only_after_the_grace():
    from rwo_failover.kube.progress import Progress

    progress = Progress(grace_seconds=10)
    progress.probed("120", at=0.0)
    assert progress.behind("100", now=10.0) is None
    assert "120" in (progress.behind("100", now=10.5) or "")
    assert progress.behind("120", now=11.0) is None, "reached"
    progress.probed("opaque", at=45.0)  # probes answer every half grace: progress is known, not compared
    progress.probed("130", at=45.0)
    assert progress.behind("not-a-number", now=50.0) is None
