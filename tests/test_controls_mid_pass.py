"""Every write under the operator's controls at that moment (issue 36, items 1, 2 and 4).

The pause switch is read live before every destructive write (a fence, a power-off, a taint, a pod or attachment
delete), not only before a pass's first write: an operator who pauses when the NodePoweredOff Warning appears, or
while a NetworkFence is being answered, stops what follows, and the pass reports the pause. A storm a paused pass
sees is remembered all the same: the pause stops actions, not the cluster's memory of its health.
"""

from __future__ import annotations

import io
import json
import time

import pytest
from conftest import SESSION_LOG, watched
from test_pause import NAME, NAMESPACE, control
from test_redfish import SILENT, bmc_file, cluster, freed, redfish_pass
from test_storm_cooldown import PARTITIONED, calm, data, storm

from rwo_failover.act.control import PAUSE_READ_SECONDS
from rwo_failover.run.cli import main
from rwo_failover.run.exitcodes import EXIT_OK, EXIT_REFUSED
from rwo_testkit import fake_cluster as fc
from rwo_testkit.redfish_bmc import RedfishEmulator


def destructive(api) -> list:
    return [r for r in api.requests if r.could_change and (r.verb, r.resource) in (
        ("delete", "pods"), ("delete", "volumeattachments"), ("patch", "nodes"), ("create", "networkfences"),
        ("patch", "networkfences"), ("delete", "networkfences"))]


@pytest.fixture(scope="module")
def bmc():
    with RedfishEmulator({"on-poweroff": "On", "on-once": "On"}) as emulator:
        yield emulator


def test_a_pause_set_during_the_force_off_wait_stops_the_taint_and_every_delete(api, kubeconfig, tmp_path, bmc):
    """Item 1: FENCING=redfish with REDFISH_POWER_OFF. The operator pauses when the NodePoweredOff Warning appears;
    the pass then waits for the BMC's Off (real seconds: the emulator applies ForceOff 1 to 11 s later). Before,
    the taint, the pod delete and the VolumeAttachment delete followed, and the pass exited 0 with paused="". Now
    none of them is made, and the pass reports the pause it found."""
    cluster(api, machine="on-poweroff")

    def pause_on_the_warning(req):
        if req.verb == "create" and req.resource == "events" and req.could_change and \
                (req.body or {}).get("reason") == "NodePoweredOff":
            control(api, {"paused": "true", "pausedBy": "erin (saw the power-off)"})
        return None
    api.hooks.append(pause_on_the_warning)
    environ = {"KUBECONFIG": kubeconfig, "LOG_FORMAT": "json", "PASS_TIMEOUT_SECONDS": "45", "ONCE_WAIT_SECONDS": "0",
               "FENCING": "redfish", "REDFISH_BMC_FILE": bmc_file(tmp_path, {SILENT: bmc.entry("on-poweroff")}),
               "REDFISH_POWER_OFF": "true"}
    out = io.StringIO()
    code = main(["--once"], environ, stdout=out, stderr=io.StringIO(), sleep=time.sleep, sightings=watched())
    SESSION_LOG.add(out.getvalue())
    logs = [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]

    assert [e for e in api.objects("events") if e["reason"] == "NodePoweredOff"], "it did power off"
    assert destructive(api) == [] and not freed(api)
    [summary] = [line for line in logs if line["message"] == "pass finished"]
    assert "by erin (saw the power-off)" in summary["paused"] and code == EXIT_OK
    assert summary["not_attempted"] >= 1 and summary["pods_deleted"] == 0


def test_a_pause_set_while_a_network_fence_is_answered_stops_every_delete(api, run_pass):
    """Item 1, FENCING=networkfence: the pass creates the fence, then waits within itself for its answer. The
    operator pauses right after the create; the fence answers Succeeded PAUSE_READ_SECONDS later (the bound on
    how old the pass's last read of the switch may be). Nothing on the node is touched."""
    fc.outage(api)
    answered = []

    def pause_then_answer(req):
        if req.verb == "create" and req.resource == "networkfences" and req.could_change and not answered:
            answered.append(time.monotonic())
            control(api, {"paused": "true", "pausedBy": "frank"})
        elif req.verb == "get" and req.resource == "networkfences" and answered:
            time.sleep(max(0.0, answered[0] + PAUSE_READ_SECONDS - time.monotonic()))  # the controller's time
            fence = api.get("networkfences", "dead")
            if fence and not fence.get("status"):
                fence["status"] = {"result": "Succeeded", "message": "fenced", "conditions": [
                    {"type": "Fenced", "status": "True", "observedGeneration": fence["metadata"]["generation"]}]}
                api.add(fence)
        return None
    api.hooks.append(pause_then_answer)

    result = run_pass(FENCING="networkfence", NETWORK_FENCE_CLASS="sim")

    assert answered and api.get("networkfences", "dead")["status"]["result"] == "Succeeded"
    assert [r for r in destructive(api) if r.resource != "networkfences"] == []
    assert api.get("pods", "db-0", "default") is not None and len(api.objects("volumeattachments")) == 1
    assert "by frank" in result.summary["paused"] and result.code == EXIT_OK


def test_a_storm_seen_during_a_pause_is_remembered(api, run_pass):
    """Item 2: a paused pass plans as a dry run, so a brake that tripped then wrote no stormTrippedAt, and the
    first calm pass after the resume force-deleted at once. The storm moment is memory, not an action: written
    under the pause; the calm pass after the resume cools down."""
    control(api, {"paused": "true", "pausedBy": "grace"})
    storm(api)
    first = run_pass()
    assert first.summary["brake"] == "unhealthy-fraction" and "stormTrippedAt" in data(api)
    assert destructive(api) == []
    resumed_control = api.get("configmaps", NAME, NAMESPACE)  # the operator flips the switch, and only it
    resumed_control["data"]["paused"] = "false"
    api.add(resumed_control)
    calm(api)

    resumed = run_pass()

    assert resumed.code == EXIT_REFUSED and resumed.summary["brake"] == "storm-cooldown"
    assert api.get("pods", "db-0", "default") is not None


def test_a_dry_run_remembers_no_storm(api, run_pass):
    """A dry run changes nothing, the control ConfigMap included."""
    storm(api)
    result = run_pass(DRY_RUN="true")
    assert result.summary["brake"] == "unhealthy-fraction" and api.get("configmaps", NAME, NAMESPACE) is None
    assert len(PARTITIONED) == 5


def test_force_off_is_followed_by_at_least_one_look_whatever_the_wait(api, run_pass, tmp_path, bmc):
    """Item 4: REDFISH_OFF_WAIT_SECONDS=1, the lowest value accepted, asked the BMC again 0 times after ForceOff
    ("no time left to wait"). Now it looks once: here the emulator, which applies ForceOff 1 to 11 s later, still
    answers On at that look, and the failure says so."""
    from test_redfish import refusal
    cluster(api, machine="on-once")
    redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: bmc.entry("on-once")}), REDFISH_POWER_OFF="true",
                 REDFISH_OFF_WAIT_SECONDS="1", PASS_TIMEOUT_SECONDS="45")  # a one-shot run's Lease watch fits

    assert [e for e in api.objects("events") if e["reason"] == "NodePoweredOff"], "ForceOff was sent"
    assert "still does not answer Off (PowerState On)" in refusal(api), refusal(api)
