"""Recovery confirmation reads the pods where a replacement can be, not the whole namespace every pass (issue 25,
reaction at 5,000 nodes; fixture tier, real client).

Before: while a freed Deployment pod's replacement was unconfirmed, every pass listed every pod of its namespace.
Next to a namespace of 3,000 pods that made each pass of continuous mode take seconds, and a second outage's
reaction waited for them (bench/steady.py: 0.6, 3.7, 8.3 s). A replacement can be confirmed only once its
volume's VolumeAttachment on its node is attached, so the pods on the nodes the PV is attached to (and on the dead
node, for the freed pod) are read; the namespace only when a record is due to time out, so its
RWOVolumeNotRecovered names exactly what is missing.
"""

from __future__ import annotations

import time

from helpers import recovery_records

from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit import fake_cluster as fc

CROWD = 60  # other pods in the namespace: each pass used to list them all


def deployment_outage(api) -> None:
    fc.outage(api, dead="dead", pods=())
    fc.add_volume(api, "data-app", namespace="shop", attached_to="dead")
    api.add(fc.pod("app-7d9f-x2x4q", "dead", namespace="shop", claims=["data-app"], terminating=True,
                   owner="ReplicaSet"))
    for i in range(CROWD):
        api.add(fc.pod(f"crowd-{i}", f"w{i % 3}", namespace="shop", owner="ReplicaSet", ready="True"))


def namespace_lists(api, since: int) -> list:
    return [r for r in api.requests[since:] if r.verb == "list" and r.path == "/api/v1/namespaces/shop/pods"]


def replacement(api, attached: bool = True) -> None:
    """Running and Ready on w1; its volume attached there, or (attached=False) no attachment made yet."""
    api.add(fc.pod("app-7d9f-q8w2p", "w1", namespace="shop", claims=["data-app"], owner="ReplicaSet", ready="True"))
    if attached:
        api.add(fc.attachment("pv-shop-data-app", "w1"))


def test_a_replacement_is_confirmed_from_the_pods_where_its_volume_is_attached_never_the_namespace(api, run_pass):
    deployment_outage(api)
    assert run_pass(OUT_OF_SERVICE_TAINT="never").code == EXIT_OK
    assert len(recovery_records(api)) == 1
    before = len(api.requests)
    assert run_pass(OUT_OF_SERVICE_TAINT="never").summary["recovery_pending"] == 1
    replacement(api)

    done = run_pass(OUT_OF_SERVICE_TAINT="never")

    assert done.summary["recovered"] == 1, done.logs[-5:]
    assert namespace_lists(api, before) == []
    on_nodes = {r.query.get("fieldSelector") for r in api.requests[before:]
                if r.verb == "list" and r.resource == "pods"}
    assert {"spec.nodeName=dead", "spec.nodeName=w1"} <= on_nodes


def test_a_record_due_to_time_out_lists_its_namespace_and_says_exactly_what_is_missing(api, run_pass):
    deployment_outage(api)
    assert run_pass(OUT_OF_SERVICE_TAINT="never").code == EXIT_OK
    api.attacher.detach()  # the CSI attacher detaches the released volume from the dead node
    replacement(api, attached=False)  # on w1, its volume not attached there: not confirmable, and not found
    time.sleep(1.1)  # through an attachment; only the namespace's list finds it and can say so
    before = len(api.requests)

    result = run_pass(OUT_OF_SERVICE_TAINT="never", RECOVERY_TIMEOUT_SECONDS="1")

    assert result.summary["not_recovered"] == 1
    assert len(namespace_lists(api, before)) == 1
    [event] = [e for e in api.objects("events") if e["reason"] == "RWOVolumeNotRecovered"]
    assert "attachment to node w1 is not attached" in event["message"], event["message"]
