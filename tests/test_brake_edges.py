"""The nodes-per-pass brake at its edge, with fixed tests (issue 37): turning its `>` into `>=` was caught only
by a property test, by chance (4 of 5 unseeded runs). A pass acts on exactly MAX_NODES_PER_PASS proven-down
nodes with something to release, and refuses one more: exit 3, brake nodes-per-pass, a FailoverRefused Event
on each, nothing written but those Events."""

from __future__ import annotations

import pytest
from helpers import deletes, detached, oos_taints, patches, pod_names, stuck

from rwo_failover.run.exitcodes import EXIT_OK, EXIT_REFUSED
from rwo_testkit import fake_cluster as fc

LIVE = 20  # enough live nodes that MAX_UNHEALTHY_FRACTION (0.5) never trips first


def outage_of(api, nodes: int) -> list[str]:
    for i in range(LIVE):
        fc.live_node(api, f"w{i:02d}")
    names = [f"dead-{i}" for i in range(nodes)]
    for i, name in enumerate(names):
        fc.dead_node(api, name)
        stuck(api, name, name=f"db-{i}")
    return names


# (setting, limit): the default is 5 (docs/settings.md), written out so that a change of default fails here.
EDGES = [({}, 5), ({"MAX_NODES_PER_PASS": "1"}, 1), ({"MAX_NODES_PER_PASS": "3"}, 3)]


@pytest.mark.parametrize("env, limit", EDGES)
def test_exactly_max_nodes_per_pass_nodes_are_all_freed(api, run_pass, env, limit):
    names = outage_of(api, limit)

    result = run_pass(**env)

    assert result.code == EXIT_OK and result.summary["brake"] == "" and result.summary["refusal"] == ""
    assert result.summary["down"] == limit and result.summary["pods_deleted"] == limit
    assert pod_names(api) == set() and detached(api) == []
    assert all(len(oos_taints(api, name)) == 1 for name in names)
    assert not [e for e in api.objects("events") if e["reason"] == "FailoverRefused"]


@pytest.mark.parametrize("env, limit", EDGES)
def test_one_node_more_than_max_nodes_per_pass_is_refused(api, run_pass, env, limit):
    names = outage_of(api, limit + 1)

    result = run_pass(**env)

    assert result.code == EXIT_REFUSED and result.summary["brake"] == "nodes-per-pass"
    assert f"{limit + 1} proven-down nodes have something to release, more than MAX_NODES_PER_PASS={limit}" \
        in result.summary["refusal"]
    [refused] = result.lines("refusing to act on anything")
    assert refused["brake"] == "nodes-per-pass"
    assert deletes(api, "pods") == [] and deletes(api, "volumeattachments") == [] and patches(api) == []
    assert len(pod_names(api)) == limit + 1
    refusals = [e for e in api.objects("events") if e["reason"] == "FailoverRefused"]
    assert refusals and {e["involvedObject"]["name"] for e in refusals} <= set(names)
    assert all("MAX_NODES_PER_PASS" in e["message"] and e["type"] == "Warning" for e in refusals)
    # Besides the Events, the only write is the storm's moment, remembered for STORM_COOLDOWN_SECONDS.
    others = [r for r in api.mutations() if r.resource != "events"]
    assert [(r.verb, r.resource, r.namespace, r.body["metadata"]["name"], sorted(r.body["data"])) for r in others] \
        == [("create", "configmaps", "rwo-failover", "rwo-failover-control", ["stormTrippedAt"])]


# The unhealthy-fraction brake at its edge (found by `make mutants` on planner.nodes: '>=' for '>' survived too).
# MAX_NODES_PER_PASS=10 keeps the other brake out of the way.
@pytest.mark.parametrize("live, dead", [(5, 5), (2, 2)])
def test_exactly_max_unhealthy_fraction_of_nodes_not_ready_still_acts(api, run_pass, live, dead):
    for i in range(live):
        fc.live_node(api, f"w{i}")
    for i in range(dead):
        fc.dead_node(api, f"dead-{i}")
        stuck(api, f"dead-{i}", name=f"db-{i}")

    result = run_pass(MAX_NODES_PER_PASS="10")  # MAX_UNHEALTHY_FRACTION: the default, 0.5

    assert result.code == EXIT_OK and result.summary["brake"] == ""
    assert result.summary["nodes_not_ready"] == dead and result.summary["nodes"] == live + dead
    assert pod_names(api) == set() and result.summary["pods_deleted"] == dead


def test_one_node_not_ready_past_max_unhealthy_fraction_is_refused(api, run_pass):
    for i in range(4):
        fc.live_node(api, f"w{i}")
    for i in range(5):
        fc.dead_node(api, f"dead-{i}")
        stuck(api, f"dead-{i}", name=f"db-{i}")

    result = run_pass(MAX_NODES_PER_PASS="10")

    assert result.code == EXIT_REFUSED and result.summary["brake"] == "unhealthy-fraction"
    assert result.summary["nodes_not_ready"] == 5
    assert result.summary["refusal"] == ("brake: 5 of 9 nodes are not Ready, more than MAX_UNHEALTHY_FRACTION=0.5; "
                                         "the control plane may be partitioned")
    assert deletes(api, "pods") == [] and patches(api) == [] and len(pod_names(api)) == 5
