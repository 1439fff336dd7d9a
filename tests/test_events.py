"""Every Event names its object by uid, as `kubectl describe` looks Events up (kind, name, namespace, uid).

tests/e2e/test_e2e_describe.py shows the same with kubectl describe on a real control plane.
"""

from __future__ import annotations

import pytest

from rwo_failover.run.exitcodes import EXIT_REFUSED
from rwo_testkit import fake_cluster as fc

PLURAL = {"Node": "nodes", "Pod": "pods", "PersistentVolumeClaim": "persistentvolumeclaims"}


def uid_now_or_before(api, kind: str, name: str, namespace: str, deleted: dict) -> str:
    for obj in api.objects(PLURAL[kind]):
        meta = obj["metadata"]
        if meta["name"] == name and meta.get("namespace", "") == namespace:
            return meta["uid"]
    return deleted[(kind, namespace, name)]


def seed_split_brain(api) -> None:
    fc.live_node(api, "alive", taints=[fc.SHUTDOWN])


def seed_brake(api) -> None:
    for i in range(2):
        fc.live_node(api, f"w{i}")
    for i in range(3):
        fc.dead_node(api, f"dead{i}")
        fc.add_volume(api, f"data-{i}", attached_to=f"dead{i}")
        api.add(fc.pod(f"db-{i}", f"dead{i}", claims=[f"data-{i}"], terminating=True))


@pytest.mark.parametrize("seed, env", [(fc.outage, {}), (fc.outage, {"OUT_OF_SERVICE_TAINT": "always"}),
                                       (seed_split_brain, {}), (seed_brake, {"MAX_UNHEALTHY_FRACTION": "0.5"})])
def test_every_event_carries_its_objects_uid(api, run_pass, seed, env):
    seed(api)
    deleted = {("Pod", p["metadata"]["namespace"], p["metadata"]["name"]): p["metadata"]["uid"]
               for p in api.objects("pods")}

    run_pass(**env)

    events = api.objects("events")
    assert events
    for event in events:
        ref = event["involvedObject"]
        expected = uid_now_or_before(api, ref["kind"], ref["name"], ref.get("namespace", ""), deleted)
        assert ref.get("uid") == expected, (event["reason"], ref)


# --- the repeated Warning's deterministic name (issue 18 review) -------------------------------------------

def split_brain(api, node: str = "odd") -> dict:
    """A node tainted for shutdown while its kubelet heartbeats: the ShutdownTaintOnLiveNode Warning."""
    for i in range(3):
        fc.live_node(api, f"w{i}")
    found = api.add(fc.node(node, ready="True", since=3600, taints=[fc.SHUTDOWN]))
    api.add(fc.lease(node, 3))
    return found


def warnings_on(api, node: dict) -> list[dict]:
    """What `kubectl describe node` shows: Events selected by involvedObject kind, name, namespace and uid."""
    return [e for e in api.objects("events") if e["type"] == "Warning" and e["involvedObject"].get("kind") == "Node"
            and e["involvedObject"].get("name") == node["metadata"]["name"]
            and not e["involvedObject"].get("namespace") and e["involvedObject"].get("uid") == node["metadata"]["uid"]]


SQUATTED = "odd.rwo-shutdowntaintonlivenode"


def tenant_event() -> dict:
    """Created by a tenant allowed to create Events in `default`, before the split-brain happens."""
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": SQUATTED, "namespace": "default"},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "innocent", "namespace": "default"},
            "type": "Normal", "reason": "Pulled", "message": "image pulled", "count": 1,
            "firstTimestamp": fc.stamp(7200), "lastTimestamp": fc.stamp(3600)}


def test_a_tenant_event_squatting_our_name_is_never_bumped_and_the_warning_still_shows(api, run_pass):
    node = split_brain(api)
    api.add(tenant_event())

    first = run_pass()
    second = run_pass()

    assert first.code == second.code == EXIT_REFUSED
    squatter = api.get("events", SQUATTED, "default")
    assert (squatter["type"], squatter["reason"], squatter["involvedObject"]["kind"], squatter["count"]) == \
        ("Normal", "Pulled", "Pod", 1), "the tenant's Event is left as it was"
    [warning] = warnings_on(api, node)
    assert warning["reason"] == "ShutdownTaintOnLiveNode" and warning["source"]["component"] == "rwo-failover"
    assert [line["event"] for line in first.lines("the name of a repeated Warning is taken by an Event that is "
                                                   "not ours; writing it under another name")] == \
        [f"default/{SQUATTED}"]
    assert not [r for r in api.requests if r.verb == "patch" and r.resource == "events" and r.name == SQUATTED]


@pytest.mark.parametrize("stale", [{"uid": None}, {"uid": "uid-of-the-node-before-it-re-registered"},
                                   {"uid": None, "namespace": "default"}])
def test_a_bump_of_our_warning_points_it_at_the_node_as_it_is_now(api, run_pass, stale):
    """Our own Warning, written before Events carried the uid, or about a Node since deleted and registered
    again under the same name: `kubectl describe node` would never show it until a bump points it at the
    current node, uid included, whatever the 10-minute bump interval says."""
    node = split_brain(api)
    assert run_pass().code == EXIT_REFUSED
    event = api.get("events", SQUATTED, "default")
    event["involvedObject"].update(stale)
    event["involvedObject"] = {k: v for k, v in event["involvedObject"].items() if v is not None}
    api.add(event)
    assert warnings_on(api, node) == []

    assert run_pass().code == EXIT_REFUSED

    [warning] = warnings_on(api, node)
    assert warning["metadata"]["name"] == SQUATTED and warning["count"] == 2


def test_a_warning_the_node_wrote_under_our_name_first_shows_ours_on_the_next_pass(api, run_pass):
    """A kubelet may create Events about its own Node (the Node authorizer allows it): it can write our repeated
    Warning's deterministic name first, with our type, reason, source and its own uid, a fresh lastTimestamp and
    a message of its choosing. The bump interval must not keep that message on the node: a pass whose Warning
    says something else bumps it at once (tests/e2e/test_e2e_node_identity.py on a real control plane)."""
    node = split_brain(api)
    api.add({"apiVersion": "v1", "kind": "Event", "metadata": {"name": SQUATTED, "namespace": "default"},
             "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": "odd", "uid": node["metadata"]["uid"]},
             "type": "Warning", "reason": "ShutdownTaintOnLiveNode", "source": {"component": "rwo-failover"},
             "message": "planned maintenance, nothing to do", "count": 1,
             "firstTimestamp": fc.stamp(5), "lastTimestamp": fc.stamp(1)})

    first = run_pass()

    assert first.code == EXIT_REFUSED
    [warning] = warnings_on(api, node)
    assert "rwo-failover will not touch this node" in warning["message"], warning["message"]
    assert warning["count"] == 2
    second = run_pass()  # ours now, and bumped within the interval only when what it says changes
    assert second.code == EXIT_REFUSED
    assert api.get("events", SQUATTED, "default")["count"] == 2
