"""Every brake and everything a pass remembers rest on current reads, in every mode (issue 36, items 3 and 5).

kube-apiserver answers a list at resourceVersion=0 from its watch cache, at whatever version it holds, which may
lag etcd (kubernetes#141887, KEP-5647); since Kubernetes 1.31 a list without a resourceVersion is a consistent read,
served from that cache only once it has caught up. The fixture answers version 0 from a lagging cache on demand
(FakeApiServer.lag_watch_cache), as kube-apiserver may.
"""

from __future__ import annotations

from rwo_failover.run.exitcodes import EXIT_REFUSED
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import TOKEN


def test_the_fixture_answers_version_0_from_a_lagging_cache_and_a_consistent_list_from_the_store(api):
    import json
    import urllib.request

    fc.live_node(api, "w0")
    api.lag_watch_cache()
    fc.live_node(api, "w1")

    def names(query: str) -> list[str]:
        request = urllib.request.Request(f"{api.url}/api/v1/nodes{query}",
                                         headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(request, timeout=5) as answer:
            return [item["metadata"]["name"] for item in json.loads(answer.read())["items"]]

    assert names("?resourceVersion=0") == ["w0"], "the lagging watch cache"
    assert names("?limit=500") == ["w0", "w1"], "a consistent list"
    api.catch_up_watch_cache()
    assert names("?resourceVersion=0") == ["w0", "w1"]


def test_a_one_shot_pass_judges_the_brakes_on_a_current_node_list_not_a_lagging_cache(api, run_pass):
    """Item 5: a partition silences 6 of 9 live nodes after the API server's watch cache stopped keeping up; a list
    at resourceVersion=0 still shows them Ready (1 of 10 not Ready), a consistent one shows 7 of 10. The brake
    must be judged on the latter: refused, nothing deleted."""
    fc.outage(api, live=9)
    api.lag_watch_cache()
    for i in range(6):
        api.add(fc.node(f"w{i}", ready="Unknown", since=30))
        api.add(fc.lease(f"w{i}", 70))

    result = run_pass()

    assert result.code == EXIT_REFUSED and result.summary["brake"] == "unhealthy-fraction"
    assert result.summary["nodes_not_ready"] == 7
    assert api.get("pods", "db-0", "default") is not None and len(api.objects("volumeattachments")) == 1
