"""Attack on issue 27 item 1 in continuous mode (stale views): the recreate judged from the watch cache, the
fence changed live meanwhile. A real loop process against the fixture API server."""

from __future__ import annotations

import time

from test_watch import live_nodes, loop, stop, wait_until, watches

from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import Fault

FENCE_ENV = {"FENCING": "networkfence", "NETWORK_FENCE_CLASS": "ceph-rbd-fence", "MIN_NOT_READY_SECONDS": "10"}


def test_a_fence_set_back_to_fenced_behind_a_lagging_watch_is_never_deleted(api, kubeconfig):
    """Our fence is Unfenced and answered (an earlier recovery); the node is up but without a Lease, so nothing
    undoes it. The fence watch lags by a minute. A human sets the fence back to Fenced; then the node dies with
    work. Whatever the cache says (Unfenced: recreate), the fence a human set back must never be deleted."""
    live_nodes(api, 3)
    api.add(fc.node("dead", ready="True", since=86400))
    fence = api.add({"apiVersion": "csiaddons.openshift.io/v1alpha1", "kind": "NetworkFence",
                     "metadata": {"name": "dead", "generation": 1,
                                  "labels": {"app.kubernetes.io/managed-by": "rwo-failover"}},
                     "spec": {"fenceState": "Unfenced", "networkFenceClassName": "ceph-rbd-fence",
                              "cidrs": [f"{fc.internal_ip('dead')}/32"]},
                     "status": {"result": "Succeeded", "message": "unfencing operation successful",
                                "conditions": [{"type": "Fenced", "status": "False", "reason": "Succeeded",
                                                "observedGeneration": 1, "message": "ok",
                                                "lastTransitionTime": fc.stamp(0)}]}})
    api.inject(Fault("watch-lag", resource="networkfences", delay=60, first=1))
    proc = loop(kubeconfig, **FENCE_ENV)
    try:
        wait_until("the first pass", lambda: watches(api), timeout=20)
        time.sleep(1)
        fence = api.get("networkfences", "dead")
        fence["spec"]["fenceState"] = "Fenced"  # a human, behind the lagging watch
        fence["metadata"]["generation"] += 1
        api.add(fence)
        fc.dead_node(api, "dead")
        fc.add_volume(api, "data-db-0", attached_to="dead")
        api.add(fc.pod("db-0", "dead", claims=["data-db-0"], terminating=True))
        mark = len(api.requests)
        # The cached plan (Unfenced: recreate) writes, so the pass reads the fences live first (issue 25) and
        # re-plans from the fence a human set back: its delete, if any is sent at all, carries what was judged.
        wait_until("the live read of the fences a writing pass makes", lambda: [
            r for r in api.requests[mark:] if r.resource == "networkfences" and r.verb == "list"
            and "resourceVersion" not in r.query], timeout=30)
        time.sleep(2)
    finally:
        stop(proc)
    deletes = [(r.status, r.body) for r in api.requests if r.resource == "networkfences" and r.verb == "delete"]
    assert api.get("networkfences", "dead")["spec"]["fenceState"] == "Fenced"
    assert all(status == 409 for status, _ in deletes), deletes
