"""The brake on a real control plane: more than half the nodes down means nothing is touched, exit 3.

A module of its own, since it needs a cluster where most nodes are dead.
"""

from __future__ import annotations

import time

import pytest

from rwo_failover.run.exitcodes import EXIT_REFUSED
from rwo_testkit.control_plane import NODE_MONITOR_GRACE_SECONDS
from rwo_testkit.e2e import CLOUD_TAINT, OOS_KEY, PASS_ENV, wait_for

pytestmark = pytest.mark.e2e


def test_more_than_half_the_nodes_down_touches_nothing(cluster):
    sa = cluster.install_rbac()
    for name in ("b1", "b2", "b3", "b4"):
        cluster.sim.add_node(name)
    # Each down node holds an RWO pod: a mass outage with something to release everywhere. (Down nodes with
    # nothing to release count toward no brake: tests/test_liveness.py.)
    for name in ("b1", "b2", "b3"):
        cluster.statefulset(f"brake-{name}", "db", node_affinity=name)
    pod = wait_for("brake-b1/db-0 running", lambda: cluster.running("brake-b1", "db-0"), 60)
    assert pod["spec"]["nodeName"] == "b1"
    for name in ("b2", "b3"):
        assert wait_for(f"brake-{name}/db-0 running", lambda n=name: cluster.running(f"brake-{n}", "db-0"),
                        60)["spec"]["nodeName"] == name
    for name in ("b1", "b2", "b3"):
        cluster.sim.power_off(name)
    for name in ("b1", "b2", "b3"):
        wait_for(f"{name} NotReady", lambda n=name: cluster.ready(n) != "True", NODE_MONITOR_GRACE_SECONDS + 20)
        cluster.taint(name, CLOUD_TAINT)
    time.sleep(int(PASS_ENV["MIN_NOT_READY_SECONDS"]) + 1)  # proven down, so the refusal names them

    result = cluster.run_pass(sa)

    assert result.code == EXIT_REFUSED and result.summary["brake"] == "unhealthy-fraction"
    assert cluster.pod("brake-b1", "db-0")["metadata"]["uid"] == pod["metadata"]["uid"]
    assert cluster.attached("pv-brake-b1-db", "b1")
    assert not any(t["key"] == OOS_KEY for name in ("b1", "b2", "b3") for t in cluster.taints(name))
    events = cluster.kube.items("/api/v1/namespaces/default/events", fieldSelector="reason=FailoverRefused")
    assert events and all(e["type"] == "Warning" for e in events)
