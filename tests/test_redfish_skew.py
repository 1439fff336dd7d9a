"""FENCING=redfish's Lease silence cannot be made up by the control plane's own clocks (found by an attack on issue
35). The silence that makes a node's BMC be asked, and with REDFISH_POWER_OFF told to ForceOff, is timed by the
Lease's managedFields stamp (made on the clock of the kube-apiserver that handled the renewal) against the Date of
the one answering the pass: a renewal stamped by a server `behind` seconds slow reads `behind` seconds older. It is
now also timed by this process's own sighting of the Lease at its version (observe/sightings.py): a kubelet that
renews on time is seen renewing before a renewal interval of its own has passed. A new process, as a CronJob's."""

from __future__ import annotations

import threading

import pytest
from test_redfish import bmc_file
from test_server_skew import fresh_process_pass

from rwo_testkit import fake_cluster as fc
from rwo_testkit.redfish_bmc import RedfishEmulator

VICTIM = "healthy"


@pytest.fixture(scope="module")
def bmc():
    with RedfishEmulator({VICTIM: "On"}) as emulator:
        yield emulator


@pytest.mark.parametrize("behind, real, silent_setting", [
    (6.0, 8.0, "10"),    # the 6 s between servers; REDFISH_SILENT_SECONDS=10 (allowed: 5 to 3600)
    (12.0, 9.0, "20"),   # the default REDFISH_SILENT_SECONDS, 12 s between servers
])
def test_a_healthy_node_whose_lease_only_looks_silent_is_never_powered_off(api, kubeconfig, tmp_path, bmc, behind,
                                                                           real, silent_setting):
    for i in range(4):
        fc.live_node(api, f"w{i}")
    api.add(fc.node(VICTIM, ready="True", since=3600))  # Ready, its kubelet posting
    fc.add_volume(api, "data-db-0", attached_to=VICTIM)
    api.add(fc.pod("db-0", VICTIM, claims=["data-db-0"], ready="True"))
    api.add(fc.lease(VICTIM, behind + real))  # renewed `real` s ago, stamped by a server `behind` s slow
    renewal = threading.Timer(10.0 - real, lambda: api.add(fc.lease(VICTIM, 0)))  # the next one, on time
    renewal.start()
    try:
        code, logs, _took = fresh_process_pass(
            kubeconfig, FENCING="redfish", REDFISH_BMC_FILE=bmc_file(tmp_path, {VICTIM: bmc.entry(VICTIM)}),
            REDFISH_SILENT_SECONDS=silent_setting, REDFISH_POWER_OFF="true", REDFISH_OFF_WAIT_SECONDS="1")
    finally:
        renewal.cancel()

    assert bmc.power(VICTIM) == "On"
    assert [e for e in api.objects("events") if e["reason"] == "NodePoweredOff"] == []
    passes = [line for line in logs if line["message"] == "pass finished"]
    assert passes and all(p["powered_off"] == 0 for p in passes) and api.get("pods", "db-0", "default")
    [first] = [line for line in logs if line["message"] == "node verdict" and line["node"] == VICTIM][:1]
    # Its BMC may be asked (a read: only its Off would prove anything), but no ForceOff is sent before this process
    # has watched the Lease a renewal interval, and by then the kubelet has renewed (found by the attack on issue
    # 36: a "not yet" here also left a partition's silent nodes out of the brakes, tests/test_own_sighting_edges.py).
    assert first["state"] == "down" and "powered off only once seen unchanged here" in first["reason"], first
