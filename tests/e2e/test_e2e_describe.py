"""Where operators look first: `kubectl describe` of the node, the claim and the pod shows our Events.

kubectl describe finds an object's Events by a field selector on involvedObject (kind, name, namespace and
uid), so an Event without the object's uid is listed by `kubectl get events` but never by describe.
"""

from __future__ import annotations

import json

import pytest

from rwo_failover.run.exitcodes import EXIT_OK, EXIT_REFUSED
from rwo_testkit.e2e import CLOUD_TAINT, outage, wait_for

pytestmark = pytest.mark.e2e
NS = "described"


@pytest.fixture(scope="module")
def sa(cluster):
    for name in ("live-a", "live-b"):
        cluster.sim.add_node(name)
    return cluster.install_rbac()


def events_section(cluster, *what: str) -> str:
    """The Events part of `kubectl describe` (admin credentials, as an operator)."""
    text = cluster.kubectl("describe", *what).stdout
    assert "Events:" in text, text
    return text.split("Events:", 1)[1]


def test_kubectl_describe_shows_our_events_on_the_node_the_claim_and_the_pod(cluster, sa):
    cluster.sim.add_node("victim")
    cluster.statefulset(NS, "db", node_affinity="victim")
    old = wait_for(f"{NS}/db-0 running", lambda: cluster.running(NS, "db-0"), 60)
    codes: list[int] = []

    timing = outage(cluster, NS, "db", node="victim", act=lambda: codes.append(cluster.run_pass(sa).code))
    assert timing is not None and set(codes) == {EXIT_OK}, codes

    def recovered() -> bool:
        assert cluster.run_pass(sa).code == EXIT_OK
        return "RWOVolumeRecovered" in events_section(cluster, "pvc", "-n", NS, "data-db-0")
    wait_for("RWOVolumeRecovered in kubectl describe pvc", recovered, 60, every=2)

    node = events_section(cluster, "node", "victim")
    for reason in ("OutOfServiceTaintAdded", "RWOVolumesReleased"):
        assert reason in node and "rwo-failover" in node, node
    claim = events_section(cluster, "pvc", "-n", NS, "data-db-0")
    assert "VolumeReleasedFromDeadNode" in claim, claim

    # The pod we force-deleted no longer exists, so nothing can describe it; its Event must still name it
    # the way describe looks pods up (kind, name, namespace and uid), and never the replacement of that name.
    selector = f"involvedObject.kind=Pod,involvedObject.name=db-0,involvedObject.namespace={NS}"
    by_uid = json.loads(cluster.kubectl("get", "events", "-n", NS, "--field-selector",
                                        f"{selector},involvedObject.uid={old['metadata']['uid']}", "-o",
                                        "json").stdout)["items"]
    assert [e["reason"] for e in by_uid if e["source"].get("component") == "rwo-failover"] == \
        ["ForceDeletedFromDeadNode"], by_uid
    assert "ForceDeletedFromDeadNode" not in events_section(cluster, "pod", "-n", NS, "db-0")
    cluster.sim.remove_node("victim")


def test_kubectl_describe_node_shows_the_split_brain_warning(cluster, sa):
    cluster.sim.add_node("alive")
    wait_for("alive Ready", lambda: cluster.ready("alive") == "True", 30)
    cluster.taint("alive", CLOUD_TAINT)

    assert cluster.run_pass(sa).code == EXIT_REFUSED

    node = events_section(cluster, "node", "alive")
    assert "ShutdownTaintOnLiveNode" in node and "Warning" in node, node
    cluster.sim.remove_node("alive")
