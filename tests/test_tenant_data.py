"""What tenants write can neither move the brakes nor break our own records (issue 26, items 3 and 4), end to end
over HTTP against the fixture API server.

Shape: any tenant may create a pod with spec.nodeName set to any registered node, mount its own bound RWO claim,
and delete the pod: on a stopped node no kubelet ever confirms the delete, so it stays Terminating. Such pods
name a node; they prove nothing about it. The brakes count a node only by what no tenant can write: the node's
own state, its Lease, and the VolumeAttachments on it.

Round trip: whatever a tenant writes that reaches a record of ours (an ownerReference's kind and name, which the
API server only checks are non-empty), our own parser reads the record back and settles it.
"""

from __future__ import annotations

import re
import time

from helpers import detached, recovery_records

from rwo_failover.run.exitcodes import EXIT_OK, EXIT_REFUSED
from rwo_testkit import fake_cluster as fc
from rwo_testkit.managed_fields import entry

STOPPED = tuple(f"stopped-{i}" for i in range(5))


def tenant_pods_on_stopped_nodes(api, nodes=STOPPED, namespace: str = "tenant") -> list[str]:
    """Stopped-but-registered nodes (shutdown taint, NotReady, Lease expired), and on each a deleted tenant pod
    naming it, all mounting one bound RWO claim that was never attached there."""
    fc.add_volume(api, "junk", namespace=namespace)
    for name in nodes:
        fc.dead_node(api, name)
        api.add(fc.pod(f"junk-{name}", name, namespace=namespace, claims=["junk"], owner=None, terminating=True,
                       phase="Pending", kubelet_ran=False))
    return [f"{namespace}/junk-{name}" for name in nodes]


def ignored_warnings(api) -> list[dict]:
    return [e for e in api.objects("events") if e["reason"] == "NotCountedByBrakes"]


def test_tenant_pods_naming_stopped_nodes_never_trip_the_nodes_brake(api, run_pass):
    """Five tenant pods on five stopped nodes next to a real outage used to make six "busy" nodes, over
    MAX_NODES_PER_PASS=5: exit 3 on every pass, nothing freed."""
    fc.outage(api, dead="dead", pods=("db-0",), live=10)
    pods = tenant_pods_on_stopped_nodes(api)

    result = run_pass()

    assert result.code == EXIT_OK, result.summary["refusal"]
    assert api.get("pods", "db-0", "default") is None, "the real outage is failed over"
    assert detached(api) == []
    [warning] = ignored_warnings(api)
    assert warning["type"] == "Warning"
    assert all(pod in warning["message"] for pod in pods), warning["message"]


def test_tenant_pods_never_make_idle_stopped_nodes_count_toward_the_unhealthy_fraction(api, run_pass):
    """Stopped instances (proven down, nothing attached) are left out of the fraction; five tenant pods used to
    put them back in: 6 of 9 nodes not Ready, over MAX_UNHEALTHY_FRACTION=0.5, refused for good."""
    fc.outage(api, dead="dead", pods=("db-0",), live=3)
    tenant_pods_on_stopped_nodes(api)

    result = run_pass()

    assert result.code == EXIT_OK, result.summary["refusal"]
    assert api.get("pods", "db-0", "default") is None and detached(api) == []


def test_the_warning_is_one_event_per_pass_naming_a_bounded_list(api, run_pass):
    nodes = tuple(f"stopped-{i:02}" for i in range(40))
    fc.outage(api, dead="dead", pods=("db-0",), live=60)
    tenant_pods_on_stopped_nodes(api, nodes)

    result = run_pass(MAX_PODS_PER_PASS="100")

    assert result.code == EXIT_OK, result.summary["refusal"]
    [warning] = ignored_warnings(api)
    assert warning["message"].startswith("40 tenant objects") and re.search(r"and \d+ more$", warning["message"])
    assert len(warning["message"]) <= 1024


def test_a_real_outage_on_more_nodes_than_the_brake_allows_still_trips_it(api, run_pass):
    """VolumeAttachments are the attach-detach controller's: six nodes with volumes attached are six nodes."""
    for i in range(10):
        fc.live_node(api, f"w{i}")
    for i in range(6):
        fc.dead_node(api, f"dead-{i}")
        fc.add_volume(api, f"data-db-{i}", attached_to=f"dead-{i}")
        api.add(fc.pod(f"db-{i}", f"dead-{i}", claims=[f"data-db-{i}"], terminating=True))
    tenant_pods_on_stopped_nodes(api)

    result = run_pass()

    assert result.code == EXIT_REFUSED and result.summary["brake"] == "nodes-per-pass"
    assert [r for r in api.requests if r.verb == "delete"] == []


def test_a_partition_still_trips_the_unhealthy_fraction_whatever_tenants_add(api, run_pass):
    """Nodes NotReady without a shutdown taint are never proven down: they always count, pods or none."""
    for i in range(3):
        fc.live_node(api, f"w{i}")
    for i in range(4):
        api.add(fc.node(f"cut-{i}", ready="Unknown", since=600, taints=[fc.UNREACHABLE]))
        api.add(fc.lease(f"cut-{i}", 640))
    fc.dead_node(api, "dead")
    fc.add_volume(api, "data-db-0", attached_to="dead")
    api.add(fc.pod("db-0", "dead", claims=["data-db-0"], terminating=True))

    result = run_pass()

    assert result.code == EXIT_REFUSED and result.summary["brake"] == "unhealthy-fraction"
    assert [r for r in api.requests if r.verb == "delete"] == []


# --- round trips through our own records -----------------------------------------------------------------------

LONG_OWNER = "r" * 404  # the API server checks an ownerReference's name is non-empty, nothing more


def long_owned_outage(api, owner_kind: str = "ReplicaSet") -> dict:
    fc.outage(api, dead="dead", pods=())
    fc.add_volume(api, "data-app", attached_to="dead")
    pod = fc.pod("app-7d9f-x2x4q", "dead", claims=["data-app"], terminating=True, owner=owner_kind)
    pod["metadata"]["ownerReferences"][0]["name"] = LONG_OWNER
    return api.add(pod)


def test_a_record_of_a_pod_with_a_404_character_owner_is_read_back_and_reported(api, run_pass):
    long_owned_outage(api)
    assert run_pass(OUT_OF_SERVICE_TAINT="never").code == EXIT_OK
    [record] = recovery_records(api)
    assert record["controller"].startswith("ReplicaSet/") and len(record["controller"]) <= 320
    time.sleep(1.1)

    result = run_pass(RECOVERY_TIMEOUT_SECONDS="1", OUT_OF_SERVICE_TAINT="never")

    assert not [line for line in result.lines("skipped") if line["kind"] == "recovery record"], result.logs
    [event] = [e for e in api.objects("events") if e["reason"] == "RWOVolumeNotRecovered"]
    assert event["involvedObject"]["name"] == "data-app" and result.summary["not_recovered"] == 1
    assert recovery_records(api) == [], "settled: removed"


def test_a_replacement_of_the_same_long_named_controller_is_confirmed(api, run_pass):
    long_owned_outage(api)
    assert run_pass(OUT_OF_SERVICE_TAINT="never").code == EXIT_OK
    other = fc.pod("app-7d9f-zz9k1", "w1", claims=["data-app"], owner="ReplicaSet", ready="True")
    other["metadata"]["ownerReferences"][0]["name"] = LONG_OWNER[:-1] + "s"  # same prefix, another controller
    api.add(other)
    api.add(fc.attachment("pv-default-data-app", "w1", attached=True))
    assert run_pass(OUT_OF_SERVICE_TAINT="never").summary["recovery_pending"] == 1, "another controller's pod"

    mine = fc.pod("app-7d9f-q8w2p", "w1", claims=["data-app"], owner="ReplicaSet", ready="True")
    mine["metadata"]["ownerReferences"][0]["name"] = LONG_OWNER
    api.add(mine)

    done = run_pass(OUT_OF_SERVICE_TAINT="never")

    assert done.summary["recovered"] == 1
    assert [e["involvedObject"]["name"] for e in api.objects("events") if e["reason"] == "RWOVolumeRecovered"] == [
        "data-app"]


def test_unreadable_tenant_pods_on_stopped_nodes_never_move_the_unhealthy_fraction(api, run_pass):
    """A pod that cannot be read blocks its node (nothing there is touched), and a blocked node used to count
    toward the fraction whatever it held: five stopped nodes, each with a tenant pod that cannot be read, refused
    every pass. With no VolumeAttachment naming them they hold no volume: left out, and named in the Warning."""
    fc.outage(api, dead="dead", pods=("db-0",), live=3)
    for i in range(5):
        fc.dead_node(api, f"stopped-{i}")
        pod = fc.pod(f"odd-{i}", f"stopped-{i}", namespace="tenant", owner=None, terminating=True)
        pod["status"] = "unreadable"
        api.add(pod)

    result = run_pass()

    assert result.code == EXIT_OK, result.summary["refusal"]
    assert api.get("pods", "db-0", "default") is None and detached(api) == []
    assert all(api.get("pods", f"odd-{i}", "tenant") for i in range(5)), "what cannot be read is never touched"
    [warning] = ignored_warnings(api)
    assert "node stopped-0 (nothing on node stopped-0 is touched" in warning["message"], warning["message"]


def test_an_unreadable_pod_on_a_node_with_a_volume_attached_still_counts(api, run_pass):
    for i in range(3):
        fc.live_node(api, f"w{i}")
    for i in range(4):
        fc.dead_node(api, f"dead-{i}")
        fc.add_volume(api, f"data-{i}", attached_to=f"dead-{i}")
        pod = api.add(fc.pod(f"db-{i}", f"dead-{i}", claims=[f"data-{i}"], terminating=True))
        pod["status"] = "unreadable"
        api.add(pod)

    result = run_pass()

    assert result.code == EXIT_REFUSED and result.summary["brake"] == "unhealthy-fraction"


# --- attack: evidence a tenant can have the attach-detach controller write (review of issue 26) ---------------

def tenant_attached_on_stopped_nodes(api, nodes=STOPPED, namespace: str = "tenant") -> list[str]:
    """Stopped-but-registered nodes, and on each a tenant pod that names it in spec.nodeName (tolerating every
    taint, so the taint manager leaves it), never deleted, mounting the tenant's own bound RWO claim. No kubelet
    ever runs it: it stays Pending with no conditions. The attach-detach controller attaches a scheduled pod's
    volumes whatever its node's state (it has no readiness check on attach), so each claim gets a
    VolumeAttachment on the stopped node, created long after that node went down: the 'evidence no tenant can
    write' is written by the controller at the tenant's request."""
    for name in nodes:
        fc.dead_node(api, name)
        fc.add_volume(api, f"junk-{name}", namespace=namespace, attached_to=name, attached_ago=None)  # now
        pod = fc.pod(f"junk-{name}", name, namespace=namespace, claims=[f"junk-{name}"], owner=None,
                     kubelet_ran=False)
        pod["spec"]["tolerations"] = [{"operator": "Exists"}]
        pod["status"] = {"phase": "Pending"}
        api.add(pod)
    return [f"{namespace}/junk-{name}" for name in nodes]


def test_tenant_pods_whose_own_claims_the_controller_attached_on_stopped_nodes_never_trip_the_nodes_brake(
        api, run_pass):
    """The attachments are made after their nodes went down (creationTimestamp, server-stamped, after the
    Lease's last renewal): released or not, never counted, and named in the Warning."""
    fc.outage(api, dead="dead", pods=("db-0",), live=10)
    tenant_attached_on_stopped_nodes(api)
    late = {va["metadata"]["name"] for va in api.objects("volumeattachments") if va["spec"]["nodeName"] != "dead"}

    result = run_pass()

    assert result.code == EXIT_OK, result.summary["refusal"]
    assert api.get("pods", "db-0", "default") is None, "the real outage is failed over"
    [warning] = ignored_warnings(api)
    assert warning["message"].startswith("10 tenant objects"), warning["message"]  # 5 pods, 5 attachments
    assert "pod tenant/junk-stopped-0 on node stopped-0" in warning["message"], warning["message"]
    assert len(late) == 5 and any(f"volumeattachment {name} on node" in warning["message"] for name in late)


def test_tenant_pods_whose_own_claims_the_controller_attached_never_move_the_unhealthy_fraction(api, run_pass):
    fc.outage(api, dead="dead", pods=("db-0",), live=3)
    tenant_attached_on_stopped_nodes(api)

    result = run_pass(MAX_NODES_PER_PASS="10")

    assert result.code == EXIT_OK, result.summary["refusal"]
    assert api.get("pods", "db-0", "default") is None, "the real outage is failed over"


# --- the reverse: evidence from before the node went down counts, attached or not ------------------------------

def nfs_outage(api, nodes: int = 6, live: int = 3) -> None:
    """`nodes` proven-down nodes (wrongly tainted for shutdown, say), each with a StatefulSet pod on an NFS claim
    (never attached: no VolumeAttachment) whose status the kubelet wrote while the node was alive."""
    for i in range(live):
        fc.live_node(api, f"w{i}")
    for i in range(nodes):
        fc.dead_node(api, f"nfs-{i}")
        fc.add_volume(api, f"data-web-{i}", csi=False)
        api.add(fc.pod(f"web-{i}", f"nfs-{i}", claims=[f"data-web-{i}"], terminating=True))


def test_nodes_whose_pods_the_kubelet_ran_count_though_their_volumes_are_never_attached(api, run_pass):
    """Six wrongly-tainted nodes with NFS pods next to three live ones: the attachment rule alone counted none
    of them, and all six pods were deleted in one pass. The kubelet's status writes from before each node went
    down count them again: refused."""
    nfs_outage(api)

    result = run_pass()

    assert result.code == EXIT_REFUSED, result.summary
    assert [r for r in api.requests if r.verb == "delete"] == []
    assert all(api.get("pods", f"web-{i}", "default") for i in range(6))


def test_nfs_nodes_count_toward_the_nodes_brake_too(api, run_pass):
    nfs_outage(api, live=20)

    result = run_pass()

    assert result.code == EXIT_REFUSED and result.summary["brake"] == "nodes-per-pass", result.summary
    assert [r for r in api.requests if r.verb == "delete"] == []


def test_a_tenant_pod_with_a_forged_kubelet_status_stamp_is_no_evidence(api, run_pass):
    """A tenant writes its pod's managedFields itself, times included: on v1.36.2 a create kept an entry
    {manager: kubelet, subresource: status, time: 2020-01-01} as given, and reset the status it sent. Only a
    status the kubelet wrote (startTime) counts, so five such pods on stopped NFS nodes count for nothing."""
    fc.outage(api, dead="dead", pods=("db-0",), live=10)
    for i in range(5):
        fc.dead_node(api, f"stopped-{i}")
        fc.add_volume(api, f"web-{i}", namespace="tenant", csi=False)
        pod = fc.pod(f"web-{i}", f"stopped-{i}", namespace="tenant", claims=[f"web-{i}"], owner=None,
                     terminating=True, kubelet_ran=False)
        pod["metadata"]["managedFields"] = [
            entry("kubelet", "2020-01-01T00:00:00Z", "status"), entry("kubectl-create", fc.stamp(0))]
        api.add(pod)

    result = run_pass()

    assert result.code == EXIT_OK, result.summary["refusal"]
    assert api.get("pods", "db-0", "default") is None
    [warning] = ignored_warnings(api)
    assert all(f"pod tenant/web-{i} on node stopped-{i}" in warning["message"] for i in range(5)), warning["message"]
