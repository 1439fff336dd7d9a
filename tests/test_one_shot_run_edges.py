"""One-shot runs at their edges: a wait for this process's own sighting that cannot fit (exit 1, never for a
paused run, a node first seen late, or over a pass's own exit 3; and seen by the alerts), a held ForceOff that
keeps time for the BMC's Off, REDFISH_POWER_OFF=false named as the cause, refusal Events for every node held,
retries stopped by a pause, and a kubelet whose status posts say it runs. Found by the attack on the fixes that
followed issue 36's attack; each failed before its fix."""

from __future__ import annotations

import json as _json
import threading
import time

import pytest
from test_own_sighting_edges import hung_machine as hung
from test_own_sighting_edges import one_run
from test_pause import control
from test_redfish import bmc_file

from rwo_failover.act.control import PAUSE_READ_SECONDS
from rwo_failover.observe.sightings import Sightings
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import Response
from rwo_testkit.redfish_bmc import RedfishEmulator


@pytest.fixture(scope="module")
def bmc():
    with RedfishEmulator({"p-hung": "On", "nopo-hung": "On", "late-hung": "On", "c-hung": "On", "sb-hung": "On",
                           "m-hung": "On", "rt-live": "On"}) as emulator:
        yield emulator


def unfit_lines(logs):
    return [line for line in logs if line["message"].startswith("a node this run cannot watch long enough")]


def test_a_paused_cronjob_run_exits_0_even_when_a_hung_machine_needs_a_longer_watch(api, kubeconfig, tmp_path, bmc):
    """Issue 36 item 6 (docs/operations.md's exit-code table): a paused pass exits 0, a pause is no failure. A paused
    pass plans and acts as a dry run, and its dry run still asks the BMC (a read), finds it On and holds the
    ForceOff (fencing_pending); run/once.py's _due then finds the 32 s watch of a 120 s Lease cannot fit and returns
    EXIT_FAILED: a paused CronJob's Job fails every run (KubeJobFailed pages) for what the operator chose."""
    control(api, {"paused": "true", "pausedBy": "alice"})
    hung(api, "p-hung", 120)
    code, logs = one_run(kubeconfig, Sightings(), FENCING="redfish", REDFISH_POWER_OFF="true",
                         REDFISH_BMC_FILE=bmc_file(tmp_path, {"p-hung": bmc.entry("p-hung")}))
    passes = [line for line in logs if line["message"] == "pass finished"]
    assert bmc.power("p-hung") == "On" and api.get("pods", "db-0", "default") is not None
    assert passes and all("alice" in (p.get("paused") or "") for p in passes), passes
    assert code == 0, (code, [u["reason"] for u in unfit_lines(logs)])


def test_redfish_power_off_false_is_named_not_pass_timeout_seconds(api, kubeconfig, tmp_path, bmc):
    """REDFISH_POWER_OFF=false (the default): a machine On is never powered off, so it is "not proven", a
    FencingFailed Warning on the node (docs/fencing.md). The hold (prove_off's hold_power_off) is checked before
    REDFISH_POWER_OFF, so with a 120 s Lease the run exits 1 telling the operator to raise PASS_TIMEOUT_SECONDS,
    which can never help: a run that waits the 32 s still powers nothing off. And no FencingFailed Event is
    written in this run."""
    hung(api, "nopo-hung", 120)
    code, logs = one_run(kubeconfig, Sightings(), FENCING="redfish",
                         REDFISH_BMC_FILE=bmc_file(tmp_path, {"nopo-hung": bmc.entry("nopo-hung")}))
    failed = [e for e in api.objects("events") if e["reason"] == "FencingFailed"]
    assert bmc.power("nopo-hung") == "On" and api.get("pods", "db-0", "default") is not None
    assert not unfit_lines(logs), [u["reason"] for u in unfit_lines(logs)]
    assert failed and "REDFISH_POWER_OFF=false" in failed[0]["message"], failed


@pytest.mark.parametrize("lease, timeout", [(110, "45"), (120, "48")],
                         ids=["lease-110-defaults", "lease-120-advised-48"])
def test_a_held_forceoff_sent_late_in_the_run_still_has_time_to_see_off(api, kubeconfig, tmp_path, bmc, lease,
                                                                         timeout):
    """_due lets a run wait for its own sighting while it keeps PASS_TIMEOUT_SECONDS/3 - START_SLACK_SECONDS;
    the next pass sends the ForceOff, then PowerWitness.prove_off waits for Off at most min(REDFISH_OFF_WAIT_SECONDS,
    remaining - PASS_TIMEOUT_SECONDS/3), which is then < 1 s or <= 0. The machine is powered off (a NodePoweredOff
    Warning; the emulator applies it 1-11 s later, as hardware does), and the pass fails: FencingFailed "rwo-failover
    touched nothing", nothing freed in this run, exit 1: issue 36 item 4's symptom, reached by the new wait.
    lease-110-defaults: every setting at its default, a kubelet Lease of 110 s. lease-120-advised-48: the 120 s
    Lease with PASS_TIMEOUT_SECONDS=48, the value the run's own "raise PASS_TIMEOUT_SECONDS to at least 48" names."""
    name = "late-hung" if lease == 110 else "c-hung"
    hung(api, name, lease)
    code, logs = one_run(kubeconfig, Sightings(), FENCING="redfish", REDFISH_POWER_OFF="true",
                         PASS_TIMEOUT_SECONDS=timeout, REDFISH_BMC_FILE=bmc_file(tmp_path, {name: bmc.entry(name)}))
    powered = [e["message"] for e in api.objects("events") if e["reason"] == "NodePoweredOff"]
    failed = [e["message"] for e in api.objects("events") if e["reason"] == "FencingFailed"]
    if powered:  # a ForceOff was sent in this run: the run must then see the Off and free the pod
        assert code == 0 and api.get("pods", "db-0", "default") is None, (code, failed)
    else:
        assert unfit_lines(logs) and code == 1, code


@pytest.mark.parametrize("timeout, wait", [("30", "12"), ("30", "11"), ("45", "20")],
                         ids=["bound-30-12", "under-30-11", "timeout-default-45-wait-20"])
def test_a_second_node_going_down_during_the_wait_is_not_a_setting_error(api, kubeconfig, timeout, wait):
    """Never cry wolf. A cascading outage: node `dead` is first seen NotReady in pass 1, the run waits
    MIN_NOT_READY_SECONDS and frees it in pass 2; meanwhile a second node `late` went NotReady (the node lifecycle
    controller marks nodes in different monitor periods). Pass 2 sees `late` for the first time; the wait for it no
    longer fits this run, and _due returns an "unfit" reason: the run exits 1 saying no run of this length ever
    will, though pass 2 freed `dead` and the next run (a CronJob minute later) frees `late` as usual."""
    fc.outage(api, live=4)

    def later() -> None:
        fc.dead_node(api, "late")
        fc.add_volume(api, "data-db-9", attached_to="late")
        api.add(fc.pod("db-9", "late", claims=["data-db-9"], terminating=True))
    timer = threading.Timer(2.0, later)
    timer.start()
    try:
        code, logs = one_run(kubeconfig, Sightings(), PASS_TIMEOUT_SECONDS=timeout, MIN_NOT_READY_SECONDS=wait,
                             ONCE_WAIT_SECONDS="30", REQUEST_TIMEOUT_SECONDS="3")
    finally:
        timer.cancel()
    passes = [line for line in logs if line["message"] == "pass finished"]
    assert api.get("pods", "db-0", "default") is None, passes  # pass 2 did its job
    assert code == 0, (code, [p.get("pods_deleted") for p in passes], [u["reason"] for u in unfit_lines(logs)])


@pytest.mark.parametrize("latency", [0.0, 0.8, 1.1, 2.5])
def test_a_one_shot_run_at_the_accepted_bound_with_a_slower_first_read(api, kubeconfig, latency):
    """Settings at the bound start-up accepts (settings/one_shot.py: a first pass of up to FIRST_PASS_SECONDS, then
    the wait, within two thirds of PASS_TIMEOUT_SECONDS and START_SLACK_SECONDS). An API server that answers the
    node and Lease lists up to 2.5 s slower each (a loaded control plane, a big cluster) still has every run free
    the node. At the old bound (the wait alone within two thirds) every such run exited 1 and freed nothing, for
    ever. latency=0 is the control."""
    fc.outage(api)

    def slow(req) -> None:
        if req.verb == "list" and req.resource in ("nodes", "leases") and latency:
            time.sleep(latency)
    api.hooks.append(slow)
    code, logs = one_run(kubeconfig, Sightings(), PASS_TIMEOUT_SECONDS="30", MIN_NOT_READY_SECONDS="12",
                         ONCE_WAIT_SECONDS="30", REQUEST_TIMEOUT_SECONDS="3")
    assert api.get("pods", "db-0", "default") is None, (code, [u["reason"] for u in unfit_lines(logs)], [
        (line["message"], line.get("error") or line.get("reason")) for line in logs if line["level"] == "ERROR"])


@pytest.mark.parametrize("fenced_wait", ["0", "5"], ids=["fenced-wait-default-0", "fenced-wait-5"])
def test_a_refusal_names_every_node_with_work_a_new_process_holds_back(api, kubeconfig, tmp_path, bmc, fenced_wait):
    """Actor.record_refusal (changed by this diff): `plan.busy_nodes or [DOWN, or NOT_YET sighting_pending]`. With
    FENCING=redfish a new process's first pass has both kinds at once: silent nodes (no shutdown taint) are now DOWN
    with sighting_pending and counted (busy_nodes), while a shutdown-tainted node seen NotReady for the first time is
    NOT_YET sighting_pending. Since busy_nodes is not empty the fallback list is never used: the tainted node, which
    holds a pod its kubelet ran and an attached RWO volume, gets no FailoverRefused Warning (docs/safety.md: "A
    refusal records one FailoverRefused Warning on each node that counts")."""
    for i in range(2):
        fc.live_node(api, f"w{i}")
    for name in ("s0", "s1"):  # silent, no shutdown taint (bare metal), the controller marked them Unknown
        api.add(fc.node(name, ready="Unknown", since=30, taints=[fc.UNREACHABLE]))
        api.add(fc.lease(name, 80))
    fc.dead_node(api, "t0")  # the cloud's (or a human's) shutdown taint
    for name in ("s0", "s1", "t0"):
        fc.add_volume(api, f"data-{name}", attached_to=name)
        api.add(fc.pod(f"db-{name}", name, claims=[f"data-{name}"], terminating=True))
    code, logs = one_run(kubeconfig, Sightings(), FENCING="redfish", ONCE_WAIT_SECONDS="0",
                         FENCED_MIN_NOT_READY_SECONDS=fenced_wait,
                         REDFISH_BMC_FILE=bmc_file(tmp_path, {"s0": bmc.entry("p-hung")}))
    [summary] = [line for line in logs if line["message"] == "pass finished"]
    refused = sorted(e["involvedObject"]["name"] for e in api.objects("events") if e["reason"] == "FailoverRefused")
    assert code == 3 and summary["brake"] == "unhealthy-fraction", summary
    verdicts = [(line["node"], line["state"]) for line in logs if line["message"] == "node verdict"]
    assert refused == ["s0", "s1", "t0"], (refused, verdicts)


def test_a_split_brain_alarm_keeps_exit_3_when_another_node_needs_a_longer_watch(api, kubeconfig, tmp_path, bmc):
    """Exit codes (docs/operations.md's table): a shutdown taint on a live node is refused loudly, exit 3
    (ShutdownTaintOnLiveNode). run/once.py lets such a pass wait (_may_wait: exit 3 with no brake) and _due's
    "unfit" for another node (a 120 s Lease, BMC On) then returns EXIT_FAILED: the run exits 1 and the split-brain
    alarm's exit code is lost."""
    hung(api, "sb-hung", 120)
    fc.live_node(api, "sb", taints=[fc.SHUTDOWN])  # alive, and tainted for shutdown: split-brain
    code, logs = one_run(kubeconfig, Sightings(), FENCING="redfish", REDFISH_POWER_OFF="true",
                         REDFISH_BMC_FILE=bmc_file(tmp_path, {"sb-hung": bmc.entry("sb-hung")}))
    passes = [line for line in logs if line["message"] == "pass finished"]
    assert passes[0]["exit_code"] == 3 and passes[0]["split_brain"] == 1, passes[0]
    assert code == 3, (code, [u["reason"] for u in unfit_lines(logs)])


@pytest.mark.parametrize("verb, resource", [("delete", "pods"), ("delete", "volumeattachments"),
                                            ("patch", "nodes")])
def test_a_pause_set_while_a_destructive_write_is_retried_stops_the_retry(api, run_pass, verb, resource):
    """D4 (controls at every write): the first attempt of a destructive write answers 503 and the operator pauses at
    that moment, and the 503 comes PAUSE_READ_SECONDS later; the retry must not be sent and the pass must report
    the pause."""
    fc.outage(api)
    sent = []

    def busy_then_pause(req):
        if (req.verb, req.resource) == (verb, resource) and req.could_change:
            sent.append(req)
            if len(sent) == 1:
                control(api, {"paused": "true", "pausedBy": "mallory (during the 503)"})
                time.sleep(PAUSE_READ_SECONDS)  # its retry starts more than that after the pause
                return Response(503, _json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                                  "reason": "ServiceUnavailable", "code": 503}).encode(),
                                {"Content-Type": "application/json"})
        return None
    api.hooks.append(busy_then_pause)
    result = run_pass()
    assert len(sent) == 1, f"{len(sent)} attempts of {verb} {resource}; the pause was set after the first"
    assert "mallory" in result.summary["paused"], result.summary


def test_a_run_that_exits_1_for_an_unfit_wait_does_not_push_a_success(api, kubeconfig, tmp_path, bmc):
    """Refuse loudly where operators look (docs/operations.md's exit-code table: 1 -> RwoFailoverPassesFailing after
    10 min). _due's EXIT_FAILED is returned by run_once after every pass has already been recorded as exit 0: the
    pushed metrics say the run succeeded (last_success set, passes_total{result="ok"}), so the alert that the table
    promises for exit 1 never fires, while the machine is never failed over."""
    from test_monitoring import groups, pushgateway, series

    gateway, url = pushgateway(tmp_path)
    try:
        hung(api, "m-hung", 120)
        code, logs = one_run(kubeconfig, Sightings(), FENCING="redfish", REDFISH_POWER_OFF="true",
                             PUSHGATEWAY_URL=url, REDFISH_BMC_FILE=bmc_file(tmp_path, {"m-hung": bmc.entry("m-hung")}))
        [pushed] = groups(url)
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
    assert code == 1 and unfit_lines(logs)
    # What RwoFailoverPassesFailing reads: the last pass later than the last success (the first pass's), and a
    # failure counted.
    assert series(pushed, "rwo_failover_passes_total").get((("result", "failed"),), 0) == 1, \
        series(pushed, "rwo_failover_passes_total")
    assert series(pushed, "rwo_failover_last_pass_timestamp_seconds")[()] > \
        series(pushed, "rwo_failover_last_success_timestamp_seconds").get((), 0)


def test_a_kubelet_posting_ready_true_is_not_powered_off_whatever_its_lease_says(api, kubeconfig, tmp_path, bmc):
    """Not this diff's (pre-existing), found while reading planner/redfish.py: judge_silent times silence by the
    Lease alone and never looks at Ready. A kubelet whose Lease renewals fail but whose status posts land (Ready=True,
    stamped 5 s ago) is alive by the node lifecycle controller's rule (either heartbeat counts) and by
    docs/safety.md's "Split-brain needs positive evidence of life ... Ready=True"; with REDFISH_POWER_OFF=true and a
    process that has watched long (continuous mode's), its machine is powered off."""
    from conftest import watched
    for i in range(4):
        fc.live_node(api, f"w{i}")
    api.add(fc.node("rt-live", ready="True", since=5, machine="rt-live"))  # status posted 5 s ago
    api.add(fc.lease("rt-live", 600))
    fc.add_volume(api, "data-db-0", attached_to="rt-live")
    api.add(fc.pod("db-0", "rt-live", claims=["data-db-0"], ready="True"))
    code, logs = one_run(kubeconfig, watched(), FENCING="redfish", REDFISH_POWER_OFF="true",
                         REDFISH_BMC_FILE=bmc_file(tmp_path, {"rt-live": bmc.entry("rt-live")}))
    powered = [e["message"] for e in api.objects("events") if e["reason"] == "NodePoweredOff"]
    assert not powered and api.get("pods", "db-0", "default") is not None, (code, powered)


def test_a_run_that_freed_a_pod_then_could_not_read_says_both_and_never_nothing_changed(api, kubeconfig):
    """The run's exit code is the most severe of its passes': pass 1 frees db-0, pass 2 (for a node due moments
    later) cannot read the cluster. "Nothing was changed" (4) would be false: the run exits 1, changed and not
    finished, and says so."""
    from rwo_testkit.fake_apiserver import Fault

    fc.outage(api, live=6)
    fc.dead_node(api, "late", down_for=1)  # NotReady for 1 s: due once MIN_NOT_READY_SECONDS have passed
    fc.add_volume(api, "data-db-9", attached_to="late")
    api.add(fc.pod("db-9", "late", claims=["data-db-9"], terminating=True))

    def unreadable_after_the_first_pass(req) -> None:
        # pass 1 ends within moments of its last release; pass 2 comes about 2 s later, for "late"
        if req.verb == "delete" and req.resource == "volumeattachments" and not timers:
            timers.append(threading.Timer(1.0, api.faults.append, [Fault("status", verb="list", status=503)]))
            timers[0].start()
        return None
    timers: list[threading.Timer] = []
    api.hooks.append(unreadable_after_the_first_pass)
    from conftest import watched

    code, logs = one_run(kubeconfig, watched(), MIN_NOT_READY_SECONDS="3", ONCE_WAIT_SECONDS="30",
                         API_MAX_ATTEMPTS="1", PASS_TIMEOUT_SECONDS="20")

    passes = [line for line in logs if line["message"] == "pass finished"]
    assert [p["exit_code"] for p in passes] == [0, 4], passes
    assert api.get("pods", "db-0", "default") is None, "pass 1 freed db-0"
    assert code == 1
    [said] = [line for line in logs if line["message"].startswith("this run changed the cluster")]
    assert said["exit_codes"] == [0, 4]


def test_a_dry_run_that_then_cannot_read_changed_nothing(api, kubeconfig):
    """What a dry run would have fenced (a webhook's answer it never asks for) is no change: a later pass that
    cannot read the cluster leaves the run at 4, nothing was changed."""
    from rwo_testkit.fake_apiserver import Fault

    fc.outage(api, live=6)
    fc.dead_node(api, "late", down_for=1)
    fc.add_volume(api, "data-db-9", attached_to="late")
    api.add(fc.pod("db-9", "late", claims=["data-db-9"], terminating=True))
    timers: list[threading.Timer] = []

    def unreadable_soon(req) -> None:
        if req.verb == "list" and req.resource == "pods" and not timers:
            timers.append(threading.Timer(1.2, api.faults.append, [Fault("status", verb="list", status=503)]))
            timers[0].start()
        return None
    api.hooks.append(unreadable_soon)
    from conftest import watched

    code, logs = one_run(kubeconfig, watched(), MIN_NOT_READY_SECONDS="3", FENCED_MIN_NOT_READY_SECONDS="3",
                         ONCE_WAIT_SECONDS="30", API_MAX_ATTEMPTS="1", PASS_TIMEOUT_SECONDS="20", DRY_RUN="true",
                         FENCING="webhook", FENCE_WEBHOOK_URL="https://fencer.example/fence")

    assert [p["exit_code"] for p in logs if p["message"] == "pass finished"] == [0, 4]
    assert api.mutations() == [] and code == 4
