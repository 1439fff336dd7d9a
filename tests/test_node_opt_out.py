"""A per-node opt-out (issue 28): a node labelled rwo-failover.io/opt-out is never judged, tainted, fenced or
freed, and the plan says why, in the planner."""

from __future__ import annotations

from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit import fake_cluster as fc

LABEL = "rwo-failover.io/opt-out"


def label(api, name: str, value: str) -> None:
    node = api.get("nodes", name)
    node["metadata"].setdefault("labels", {})[LABEL] = value
    api.add(node)


def test_an_opted_out_node_is_never_judged_tainted_nor_freed_and_the_plan_says_why(api, run_pass):
    fc.outage(api)
    label(api, "dead", "true")
    result = run_pass()
    assert result.code == EXIT_OK
    assert api.mutations() == [], "nothing written: no taint, no delete, no Event"
    assert api.get("pods", "db-0", "default") is not None
    [skip] = [line for line in result.lines("skipped") if line["object"] == "dead"]
    assert LABEL in skip["reason"] and "never" in skip["reason"]
    assert not [line for line in result.lines("node verdict") if line["node"] == "dead"]


def test_the_label_set_to_false_opts_nothing_out(api, run_pass):
    fc.outage(api)
    label(api, "dead", "false")
    assert run_pass().code == EXIT_OK and api.get("pods", "db-0", "default") is None


def test_a_networkfence_is_never_asked_for_an_opted_out_node(api, run_pass):
    fc.outage(api)
    label(api, "dead", "")
    result = run_pass(FENCING="networkfence", NETWORK_FENCE_CLASS="ceph")
    assert result.code == EXIT_OK and api.mutations() == [] and api.objects("networkfences") == []


def test_a_label_added_after_the_plan_stops_every_write_at_the_live_re_check(api, run_pass):
    """The label is read live before each destructive write, as liveness is: set between the plan and the
    first write, nothing on the node is touched."""
    fc.outage(api)

    def opt_out_on_recheck(req):
        if req.verb == "get" and req.resource == "nodes" and req.name == "dead":
            node = api.get("nodes", "dead")
            if LABEL not in node["metadata"].get("labels", {}):
                label(api, "dead", "true")
        return None
    api.hooks.append(opt_out_on_recheck)
    result = run_pass()
    assert api.get("pods", "db-0", "default") is not None
    assert not [r for r in api.mutations() if r.resource in ("pods", "nodes", "volumeattachments")]
    # What must happen (issue 37: this passed when every pass crashed): the plan was to free the pod; the live
    # re-check found the label and said so, and the pass ends well (exit 0).
    assert result.code == EXIT_OK and result.summary["pods_planned"] == 1
    assert result.summary["nodes_not_down_on_recheck"] == 1 and result.summary["pods_deleted"] == 0
    [line] = result.lines("node no longer proven down on live re-check; nothing more is written on it")
    assert line["node"] == "dead" and line["reason"].startswith(f"opted out by its label {LABEL}")
