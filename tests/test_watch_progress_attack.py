"""Issue 25 attack (stale views): the progress check must not be defeated by a probe that keeps failing, nor by
server resourceVersions that go backwards (an etcd restored from a snapshot without --bump-revision)."""

from __future__ import annotations

import time

from test_watch import settings_for, wait_until

from rwo_failover.kube import Api, load_api_client
from rwo_failover.kube.cache import WatchedCluster
from rwo_failover.run.metrics import Metrics
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import Fault, Response, _status_body


def _probe(req) -> bool:
    return req.verb == "list" and req.resource == "nodes" and req.query.get("limit") == "1"


def test_a_probe_that_always_fails_does_not_leave_a_frozen_cache_fresh_for_ever(api, kubeconfig):
    """Bookmarks without progress while every probe is refused (an API server shedding list load with 429, as
    priority and fairness does under the very overload that stalls a watch cache): the cache's progress is
    unknown, so it must not stay "fresh" until RELIST_SECONDS."""
    api.bookmark_seconds = 0.5
    fc.live_node(api, "a")
    api.inject(Fault("watch-behind", resource="nodes", delay=3600))
    api.hooks.append(lambda req: Response(429, _status_body(429, "TooManyRequests", "slow down"),
                                          {"Content-Type": "application/json"}) if _probe(req) else None)
    settings = settings_for(kubeconfig, WATCH_STALE_SECONDS="5", API_MAX_ATTEMPTS="1")
    api_client = load_api_client(settings)
    cluster = WatchedCluster(lambda: Api(api_client, settings), settings, lambda _why: None, Metrics())
    cluster.start()
    try:
        cluster.view(Api(api_client, settings))
        nodes = cluster.reflectors["nodes"]
        fc.dead_node(api, "b")
        wait_until("a probe refused", lambda: any(_probe(r) and r.status == 429 for r in api.requests))
        time.sleep(2 * 5 + 5 / 2)
        assert nodes.age() < 1, "bookmarks keep coming"
        assert cluster.behind() is not None or "b" in nodes.items, \
            "a cache whose progress cannot be checked for twice WATCH_STALE_SECONDS is still called current"
    finally:
        cluster.stop()


def test_server_versions_that_go_backwards_are_not_taken_for_progress(api, kubeconfig):
    """An etcd restored from a snapshot: the server's resourceVersion falls below the cache's. A watch resumed
    from the cache's version waits for a revision the server will not reach for a long time, bookmarking the
    old version; every probe reads a version below it, which the check took for "reached"."""
    api.bookmark_seconds = 0.5
    fc.live_node(api, "a")
    settings = settings_for(kubeconfig, WATCH_STALE_SECONDS="5")
    api_client = load_api_client(settings)
    cluster = WatchedCluster(lambda: Api(api_client, settings), settings, lambda _why: None, Metrics())
    cluster.start()
    try:
        cluster.view(Api(api_client, settings))
        nodes = cluster.reflectors["nodes"]
        for i in range(20):  # the cache moves on with the server...
            fc.live_node(api, f"n{i}")
        wait_until("the cache caught up", lambda: nodes.version == str(api.resource_version))
        with api.lock:  # ...then etcd is restored from a snapshot taken at an earlier revision
            api.resource_version -= 15
        fc.dead_node(api, "b")
        time.sleep(2 * 5 + 5 / 2)
        assert nodes.age() < 1, "bookmarks keep coming"
        assert "b" in nodes.items or cluster.behind() is not None, \
            f"cache at {nodes.version}, server at {api.resource_version}: a node change unseen, cache called current"
    finally:
        cluster.stop()


def test_progress_unknown_or_backwards_is_behind_until_a_list_replaces_the_cache():
    from rwo_failover.kube.progress import Progress

    progress = Progress(grace_seconds=10)
    progress.listed(started=0.0)
    progress.probed("120", at=5.0, cache_before="100")
    assert progress.behind("120", now=20.0) is None
    assert "could not be read for 21s" in (progress.behind("120", now=26.0) or ""), "no probe answered since 5 s"
    progress.probed("125", at=26.0, cache_before="130")
    assert "went backwards" in (progress.behind("130", now=26.0) or "")
    assert "went backwards" in (progress.behind("999", now=27.0) or ""), "only a list ends it"
    progress.probed("140", at=27.0, cache_before="125")
    progress.listed(started=28.0)
    assert progress.behind("126", now=29.0) is None, "the list superseded the probe at 140, read before it began"
    progress.probed("opaque", at=30.0, cache_before="also-opaque")
    assert progress.behind("also-opaque", now=45.0) is None
