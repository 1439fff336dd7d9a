"""UNDO: what proves a node's machine power-cycled before our out-of-service taint (or NetworkFence) comes off
(planner/undo.py), through whole passes. bootid, the default, is the node's own word; operator adds an operator's
word on our record of that one outage; bmc adds the BMC's Off when we acted and its On now (sushy-tools)."""

from __future__ import annotations

import base64
import copy
import json
import ssl
import time
import urllib.request

import pytest
from test_out_of_service import oos_taints, stuck
from test_redfish import SILENT, bmc_file, freed, redfish_pass

from rwo_failover.model import POWER_CYCLED_ANNOTATION
from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit import fake_cluster as fc
from rwo_testkit.redfish_bmc import PASSWORD, USER, RedfishEmulator

OOS = "node.kubernetes.io/out-of-service"


@pytest.fixture
def cluster(api):
    """Four live workers, w0..w3, beside the nodes a test adds: the cluster of tests/test_out_of_service.py."""
    for i in range(4):
        fc.live_node(api, f"w{i}")
    return api


def record_of(api, node: str) -> dict:
    [found] = [c for c in api.objects("configmaps") if c["metadata"]["name"].startswith("rwo-taint-")
               and json.loads(c["data"]["record"])["node"] == node]
    return found


def acknowledge(api, node: str) -> None:
    """What the OutOfServiceTaintKept Warning tells the operator to run, done through the fixture."""
    record = record_of(api, node)
    record["metadata"].setdefault("annotations", {})[POWER_CYCLED_ANNOTATION] = "true"
    api.add(record)


def back(api, name: str, boot_id: str) -> None:
    """The node Ready again with a fresh Lease, keeping its uid and our taint, reporting `boot_id`. By then the
    CSI attacher has long detached what the failover released (undo waits for that)."""
    api.attacher.detach()
    current = api.get("nodes", name)
    ours = [t for t in current["spec"].get("taints") or [] if t["key"] == OOS]
    node = fc.node(name, ready="True", since=120, taints=ours)
    node["metadata"]["uid"] = current["metadata"]["uid"]
    api.add(fc.rebooted(node, boot_id))
    api.add(fc.lease(name, 2))


def dies(api, name: str) -> None:
    """Its machine stops: NotReady for 10 minutes with the cloud's shutdown taint; its uid and boot kept."""
    current = api.get("nodes", name)
    dead = fc.node(name, ready="Unknown", since=600, taints=[fc.SHUTDOWN, fc.UNREACHABLE])
    dead["metadata"]["uid"] = current["metadata"]["uid"]
    api.add(fc.rebooted(dead, current["status"]["nodeInfo"]["bootID"]))
    api.add(fc.lease(name, 640))


# --- UNDO=operator ------------------------------------------------------------------------------------------------

def test_operator_keeps_our_taint_until_the_operator_s_word_is_on_our_record_of_the_outage(cluster, run_pass):
    fc.dead_node(cluster, "n1")
    stuck(cluster, "n1")
    assert run_pass(UNDO="operator").code == EXIT_OK and len(oos_taints(cluster, "n1")) == 1
    back(cluster, "n1", "2b2b2b2b-2b2b-4b2b-8b2b-2b2b2b2b2b2b")  # rebooted, by its own word
    time.sleep(2.1)

    kept = run_pass(UNDO="operator", RECOVERY_SECONDS="1")

    assert kept.code == EXIT_OK and len(oos_taints(cluster, "n1")) == 1
    [event] = [e for e in cluster.objects("events") if e["reason"] == "OutOfServiceTaintKept"]
    command = f"annotate configmap {record_of(cluster, 'n1')['metadata']['name']} {POWER_CYCLED_ANNOTATION}=true"
    assert command in event["message"] and "UNDO=operator" in event["message"]
    acknowledge(cluster, "n1")

    lifted = run_pass(UNDO="operator", RECOVERY_SECONDS="1")

    assert lifted.code == EXIT_OK and oos_taints(cluster, "n1") == [] and fc.taint_records(cluster) == []


def test_an_operator_s_word_from_an_earlier_outage_is_never_replayed(cluster, run_pass):
    """Found by an attack on issue 35, when the word was a Node label bound to a bootID: the label outlived its
    outage, and a node whose kubelet credential is stolen reported that old bootID again after a later outage, with
    no power cycle, and had our taint lifted. The word now lives on our record of one outage, in our namespace."""
    b2, b3 = "2b2b2b2b-2b2b-4b2b-8b2b-2b2b2b2b2b2b", "3c3c3c3c-3c3c-4c3c-8c3c-3c3c3c3c3c3c"
    fc.dead_node(cluster, "n1")
    stuck(cluster, "n1")
    run_pass(UNDO="operator")
    back(cluster, "n1", b2)
    acknowledge(cluster, "n1")
    time.sleep(2.1)
    assert run_pass(UNDO="operator", RECOVERY_SECONDS="1").summary["taints_removed"] == 1, "outage 1, confirmed"
    cluster.add(fc.rebooted(cluster.get("nodes", "n1"), b3))  # a maintenance reboot; then a real outage
    dies(cluster, "n1")
    stuck(cluster, "n1")
    assert run_pass(UNDO="operator").code == EXIT_OK and len(oos_taints(cluster, "n1")) == 1
    back(cluster, "n1", b2)  # no power cycle; the kubelet reports the bootID an operator once vouched for
    time.sleep(2.1)

    result = run_pass(UNDO="operator", RECOVERY_SECONDS="1")

    assert len(oos_taints(cluster, "n1")) == 1 and result.summary["taints_removed"] == 0
    assert [s for s in result.lines("skipped") if s["object"] == "n1" and "UNDO=operator" in s["reason"]]


def test_a_record_written_again_for_a_new_outage_drops_the_word_given_for_the_old_one(cluster, run_pass):
    """Our record of a taint a human removed (the word on it) is written again, not replaced whole, when the node
    is tainted anew: the word must not carry over to the new outage."""
    node = fc.node("n1", ready="Unknown", since=600, taints=[fc.SHUTDOWN, fc.UNREACHABLE])
    cluster.add(fc.mark_ours(cluster, node))  # a record of ours, its taint removed since
    cluster.add(fc.lease("n1", 640))
    acknowledge(cluster, "n1")
    stuck(cluster, "n1")
    cluster.hooks.append(lambda req: time.sleep(0) or None)

    # The plan drops the stale record after the taint's write-ahead replaced it (the drop's precondition fails).
    assert run_pass(UNDO="operator").code == EXIT_OK and len(oos_taints(cluster, "n1")) == 1
    found = record_of(cluster, "n1")
    assert POWER_CYCLED_ANNOTATION not in (found["metadata"].get("annotations") or {})


# --- UNDO=bmc --------------------------------------------------------------------------------------------------

@pytest.fixture
def bmc():
    with RedfishEmulator({"m": "Off"}) as emulator:
        yield emulator


def power_on(bmc: RedfishEmulator, name: str) -> None:
    auth = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    request = urllib.request.Request(
        f"{bmc.endpoint(name)}/Actions/ComputerSystem.Reset", data=json.dumps({"ResetType": "On"}).encode(),
        headers={"Authorization": f"Basic {auth}", "Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=bmc.ca_file), timeout=5):
        pass
    ends = time.monotonic() + 20  # the fake driver applies a reset 1 to 11 s after accepting it
    while bmc.power(name) != "On" and time.monotonic() < ends:
        time.sleep(0.5)
    assert bmc.power(name) == "On"


def silent_oos(api) -> list:
    return [t for t in api.get("nodes", SILENT)["spec"].get("taints") or () if t["key"] == OOS]


def back_claiming_a_reboot(api) -> None:
    current = api.get("nodes", SILENT)
    node = fc.node(SILENT, ready="True", since=1, taints=silent_oos(api), machine="m")
    node["metadata"]["uid"] = current["metadata"]["uid"]
    api.add(fc.rebooted(node))
    api.add(fc.lease(SILENT, 1))


def tainted_by_a_redfish_pass(api, run_pass, path: str, bmc: RedfishEmulator) -> None:
    from test_redfish import cluster as redfish_cluster
    redfish_cluster(api, machine="m")
    first = redfish_pass(run_pass, path, UNDO="bmc")  # the machine is off (a power cut): its BMC answers Off
    assert first.code == EXIT_OK and freed(api), first.logs[-5:]
    [record] = fc.taint_records(api)
    assert record["bmcOffAt"], "the BMC's Off recorded with our taint"


def test_bmc_lifts_our_taint_once_the_bmc_shows_the_machine_back_on(api, run_pass, tmp_path, bmc):
    path = bmc_file(tmp_path, {SILENT: bmc.entry("m")})
    tainted_by_a_redfish_pass(api, run_pass, path, bmc)
    power_on(bmc, "m")
    back_claiming_a_reboot(api)
    time.sleep(2.1)

    result = redfish_pass(run_pass, path, UNDO="bmc", RECOVERY_SECONDS="1")

    assert result.code == EXIT_OK and silent_oos(api) == [] and fc.taint_records(api) == []


def test_bmc_keeps_our_taint_when_the_node_claims_a_reboot_and_the_bmc_says_off(api, run_pass, tmp_path, bmc):
    """A stolen kubelet credential, used from elsewhere, posts Ready, renews the Lease and reports a new bootID;
    the machine stays Off."""
    path = bmc_file(tmp_path, {SILENT: bmc.entry("m")})
    tainted_by_a_redfish_pass(api, run_pass, path, bmc)
    back_claiming_a_reboot(api)
    time.sleep(2.1)

    result = redfish_pass(run_pass, path, UNDO="bmc", RECOVERY_SECONDS="1")

    assert bmc.power("m") == "Off" and len(silent_oos(api)) == 1 and result.summary["taints_removed"] == 0
    assert [line for line in result.lines("out-of-service taint left in place") if "UNDO=bmc" in line["reason"]]


def test_bootid_lifts_our_taint_on_the_node_s_own_word_the_documented_limit(cluster, run_pass):
    """The default: a node that reports a new bootID without a power cycle has our taint lifted. Only the node can
    tell its reboot; docs/safety.md says so (Known limits), and the stronger modes above close it."""
    fc.dead_node(cluster, "n1")
    stuck(cluster, "n1")
    run_pass()
    back(cluster, "n1", "2b2b2b2b-2b2b-4b2b-8b2b-2b2b2b2b2b2b")  # claimed, no power cycle
    time.sleep(2.1)
    assert run_pass(RECOVERY_SECONDS="1").summary["taints_removed"] == 1


# --- two outages under one standing taint ---------------------------------------------------------------------

def dies_under_our_taint(api, name: str) -> None:
    """As dies(), with our out-of-service taint of the earlier outage still on the node."""
    ours = oos_taints(api, name)
    dies(api, name)
    dead = api.get("nodes", name)
    dead["spec"]["taints"] = dead["spec"]["taints"] + ours
    api.add(dead)


@pytest.mark.parametrize("undo", ["bootid", "operator"])
def test_our_taint_stays_until_the_machine_reboots_after_the_last_release_through_it(cluster, run_pass, undo):
    """The node comes back rebooted (B2), dies again before undo lifts our taint, and a pod that ran there meanwhile
    is released through it. The record must name the machine as it was at that second release: back without a
    reboot (still B2), or with the operator's word given for the first outage, the taint stays."""
    b2 = "2b2b2b2b-2b2b-4b2b-8b2b-2b2b2b2b2b2b"
    fc.dead_node(cluster, "n1")
    stuck(cluster, "n1")
    assert run_pass(UNDO=undo).summary["taints_added"] == 1
    back(cluster, "n1", b2)  # outage 1 over, rebooted; no pass lifts our taint before the node dies again
    if undo == "operator":
        acknowledge(cluster, "n1")  # the operator's word, for outage 1
    stuck(cluster, "n1", "db-1")  # a pod that tolerated our taint ran there meanwhile
    dies_under_our_taint(cluster, "n1")

    second = run_pass(UNDO=undo)

    assert second.summary["taints_added"] == 0, "our taint of outage 1 still stands"
    assert second.summary["pods_deleted"] == 1 and second.summary["attachments_deleted"] == 1, "outage 2 released"
    assert json.loads(record_of(cluster, "n1")["data"]["record"])["bootID"] == b2, "the machine at the release"
    back(cluster, "n1", b2)  # back from outage 2 without a reboot
    time.sleep(2.1)

    result = run_pass(UNDO=undo, RECOVERY_SECONDS="1")

    assert result.code == EXIT_OK and result.summary["taints_removed"] == 0
    assert len(oos_taints(cluster, "n1")) == 1
    [kept] = [e for e in cluster.objects("events") if e["reason"] == "OutOfServiceTaintKept"]
    assert "n1" in kept["involvedObject"]["name"]


def kubernetes_releases(api, pod: str, claim: str) -> None:
    """What our standing taint makes Kubernetes do with no pass of ours: PodGC force-deletes a terminating pod on a
    NotReady node that carries the out-of-service taint, and the attacher's VolumeAttachment goes with it."""
    api.delete_object("pods", pod, "default")
    for attachment in api.objects("volumeattachments"):
        if attachment["spec"]["source"]["persistentVolumeName"] == f"pv-default-{claim}":
            api.remove("volumeattachments", attachment["metadata"]["name"])


@pytest.mark.parametrize("undo", ["bootid", "operator"])
@pytest.mark.parametrize("paused", [False, True], ids=["acting", "paused"])
def test_a_release_kubernetes_makes_through_our_taint_is_one_undo_waits_for_a_reboot_after(cluster, run_pass, undo,
                                                                                          paused):
    """As above, but the second release is Kubernetes' own, through our standing taint, before (or while paused)
    our pass has anything left to release: the record must still name the machine as it is now that the node is
    down again, and the operator's word for the first outage must not carry over."""
    b2 = "2b2b2b2b-2b2b-4b2b-8b2b-2b2b2b2b2b2b"
    fc.dead_node(cluster, "n1")
    stuck(cluster, "n1")
    assert run_pass(UNDO=undo).summary["taints_added"] == 1
    back(cluster, "n1", b2)
    if undo == "operator":
        acknowledge(cluster, "n1")
    stuck(cluster, "n1", "db-1")
    dies_under_our_taint(cluster, "n1")
    kubernetes_releases(cluster, "db-1", "data-db-1")
    if paused:
        from test_pause import control
        control(cluster, {"paused": "true", "pausedBy": "erin"})

    second = run_pass(UNDO=undo)

    assert second.code == EXIT_OK and second.summary["pods_deleted"] == 0
    found = record_of(cluster, "n1")
    assert json.loads(found["data"]["record"])["bootID"] == b2, "the machine as it is now it is down again"
    assert POWER_CYCLED_ANNOTATION not in (found["metadata"].get("annotations") or {})
    if paused:
        found = cluster.get("configmaps", "rwo-failover-control", "rwo-failover")
        found["data"]["paused"] = "false"
        cluster.add(found)
    back(cluster, "n1", b2)  # back without a reboot
    time.sleep(2.1)

    result = run_pass(UNDO=undo, RECOVERY_SECONDS="1")

    assert result.code == EXIT_OK and result.summary["taints_removed"] == 0 and len(oos_taints(cluster, "n1")) == 1


def test_a_node_booting_after_the_outage_is_not_taken_for_a_new_outage(cluster, run_pass):
    """A power-cycled node's kubelet posts its new bootID with Ready=False while it starts (CNI, the runtime): that
    is no new outage, and the record keeps the machine of the last release, so undo lifts our taint once Ready.
    Only the kubelet going silent again (Ready=Unknown) is a new outage (machines_now)."""
    fc.dead_node(cluster, "n1")
    stuck(cluster, "n1")
    assert run_pass().summary["taints_added"] == 1
    before = json.loads(record_of(cluster, "n1")["data"]["record"])["bootID"]
    current = cluster.get("nodes", "n1")
    ours = [t for t in current["spec"]["taints"] if t["key"] == OOS]
    starting = fc.node("n1", ready="False", since=5, taints=ours)
    starting["metadata"]["uid"] = current["metadata"]["uid"]
    cluster.add(fc.rebooted(starting, "2b2b2b2b-2b2b-4b2b-8b2b-2b2b2b2b2b2b"))
    cluster.add(fc.lease("n1", 1))

    assert run_pass().code == EXIT_OK
    assert json.loads(record_of(cluster, "n1")["data"]["record"])["bootID"] == before

    back(cluster, "n1", "2b2b2b2b-2b2b-4b2b-8b2b-2b2b2b2b2b2b")
    time.sleep(2.1)
    assert run_pass(RECOVERY_SECONDS="1").summary["taints_removed"] == 1


@pytest.mark.parametrize("undo, change", [("operator", "withdraw-word"), ("bootid", "delete-record")])
def test_a_record_changed_before_the_retried_undo_patch_keeps_our_taint(cluster, run_pass, undo, change):
    """The removal's first patch meets a 409 (a kubelet's status post), and at that moment an operator changes our
    record: withdraws the power-cycled word (UNDO=operator), or deletes the record (the taint is no longer ours).
    The retry reads the node again, live, and must judge it by the record as it is now, not as read a moment before
    (found by an attack on the record's read once a second: the taint was lifted)."""
    fc.dead_node(cluster, "n1")
    stuck(cluster, "n1")
    assert run_pass(UNDO=undo).code == EXIT_OK and len(oos_taints(cluster, "n1")) == 1
    back(cluster, "n1", "2b2b2b2b-2b2b-4b2b-8b2b-2b2b2b2b2b2b")  # rebooted, by its own word
    if undo == "operator":
        acknowledge(cluster, "n1")
    time.sleep(2.1)
    changed = []

    def kubelet_posts_and_operator_changes_the_record(req):
        if req.verb == "patch" and req.resource == "nodes" and not changed:
            record = copy.deepcopy(record_of(cluster, "n1"))
            if change == "withdraw-word":
                record["metadata"]["annotations"].pop(POWER_CYCLED_ANNOTATION)
                cluster.add(record)
            else:
                cluster.remove("configmaps", record["metadata"]["name"], record["metadata"]["namespace"])
            cluster.add(copy.deepcopy(cluster.get("nodes", "n1")))  # a status post: a new resourceVersion
            changed.append(req)
        return None
    cluster.hooks.append(kubelet_posts_and_operator_changes_the_record)

    result = run_pass(UNDO=undo, RECOVERY_SECONDS="1")

    assert changed and result.summary["taints_removed"] == 0 and len(oos_taints(cluster, "n1")) == 1, result.summary


def test_an_operator_s_word_given_during_a_release_does_not_carry_over_to_it(cluster, run_pass):
    """UNDO=operator, two outages under one standing taint: while the second outage's pass re-checks the node before
    releasing through our taint, an operator confirms a power cycle (of the first outage) on our record. The
    record's refresh at the release must read it now and drop that word, or it would count for this release."""
    b2 = "2b2b2b2b-2b2b-4b2b-8b2b-2b2b2b2b2b2b"
    fc.dead_node(cluster, "n1")
    stuck(cluster, "n1")
    assert run_pass(UNDO="operator").summary["taints_added"] == 1
    back(cluster, "n1", b2)
    stuck(cluster, "n1", "db-1")
    dies_under_our_taint(cluster, "n1")
    confirmed = []

    gets = []

    def operator_confirms_mid_pass(req):  # after the first re-check read (and kept) the record, before the refresh
        if req.verb == "get" and req.resource == "nodes" and req.name == "n1":
            gets.append(req)
            if len(gets) == 2:
                acknowledge(cluster, "n1")
                confirmed.append(req)
        return None
    cluster.hooks.append(operator_confirms_mid_pass)

    second = run_pass(UNDO="operator")

    assert confirmed and second.summary["pods_deleted"] == 1
    found = record_of(cluster, "n1")
    assert POWER_CYCLED_ANNOTATION not in (found["metadata"].get("annotations") or {}), "the word did not carry over"
