"""Every Event names its object by uid, as `kubectl describe` looks Events up (kind, name, namespace, uid).

tests/e2e/test_e2e_describe.py shows the same with kubectl describe on a real control plane.
"""

from __future__ import annotations

import pytest

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
