"""Attacks on FENCING=redfish (issue 29, section 2), each a defect found by review, against sushy-tools'
emulator or a raw TLS server, the fixture API server and the real client.

- Partitions: nodes silent with nothing to release were left out of the brakes as "idle", as if proven down;
  silence is not proof, so a partition of mostly idle nodes let the one with a volume be powered off and freed.
- Renewals: a node whose kubelet renews its Lease less often than REDFISH_SILENT_SECONDS (a longer
  nodeLeaseDurationSeconds) was "silent" between two healthy renewals, and its BMC told to power it off.
- Identity: a BMC answering Off for another resource than the entry's ComputerSystem was taken as proof; a
  Reset action target naming another system on the same BMC was POSTed ForceOff.
"""

from __future__ import annotations

import json

import pytest
from test_redfish import SILENT, bmc_file, cluster, freed, no_secret, redfish_pass, refusal, untouched

from rwo_failover.run.exitcodes import EXIT_FAILED, EXIT_OK, EXIT_REFUSED
from rwo_testkit import fake_cluster as fc
from rwo_testkit.redfish_bmc import RedfishEmulator, _RawTLS


@pytest.fixture(scope="module")
def bmc():
    with RedfishEmulator({"off": "Off", "healthy": "On", "other": "On"}) as emulator:
        yield emulator


def test_a_partition_of_idle_silent_nodes_still_trips_the_brake(api, run_pass, tmp_path, bmc):
    """4 live nodes, 7 silent (a partition): 6 hold nothing, 1 holds a volume. Silent is not proven down, so
    none may be left out of the fraction: 7 of 11 > 0.5, refused, no BMC asked, nothing freed."""
    cluster(api)
    for i in range(6):
        api.add(fc.node(f"q{i}", ready="True", since=3600))
        api.add(fc.lease(f"q{i}", 30))
    result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: bmc.entry("off")}))

    assert result.code == EXIT_REFUSED, result.logs
    assert untouched(api)
    assert not result.lines("its BMC answers PowerState Off: proven down")


def test_a_partition_of_idle_not_ready_nodes_still_trips_the_brake(api, run_pass, tmp_path, bmc):
    """The same after the node-monitor grace: NotReady (Unknown) without a shutdown taint always counted
    (docs/safety.md); FENCING=redfish must not make them "proven down and idle"."""
    cluster(api)
    for i in range(6):
        api.add(fc.node(f"q{i}", ready="Unknown", since=60))
        api.add(fc.lease(f"q{i}", 90))
    result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: bmc.entry("off")}))

    assert result.code == EXIT_REFUSED, result.logs
    assert untouched(api)


def test_a_kubelet_renewing_less_often_than_the_silence_is_never_powered_off(api, run_pass, tmp_path, bmc):
    """leaseDurationSeconds 120: the kubelet renews every 30 s. 25 s after a renewal it is healthy, yet
    older than REDFISH_SILENT_SECONDS=20: its BMC must not be told to power it off."""
    for i in range(4):
        fc.live_node(api, f"w{i}")
    api.add(fc.node(SILENT, ready="True", since=3600))
    api.add(fc.lease(SILENT, 25, duration=120))
    fc.add_volume(api, "data-db-0", attached_to=SILENT)
    api.add(fc.pod("db-0", SILENT, claims=["data-db-0"], ready="True"))
    result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: bmc.entry("healthy")}),
                          REDFISH_POWER_OFF="true", REDFISH_OFF_WAIT_SECONDS="1")

    assert bmc.power("healthy") == "On", "a heartbeating node was powered off"
    assert not [e for e in api.objects("events") if e["reason"] == "NodePoweredOff"]
    assert untouched(api)
    assert result.code == EXIT_OK, result.logs


def _answering(body: dict) -> _RawTLS:
    raw = json.dumps(body).encode()
    return _RawTLS(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                   b"Connection: close\r\n\r\n" % len(raw) + raw)


def test_off_for_another_system_is_not_proof(api, run_pass, tmp_path):
    """The entry names /redfish/v1/Systems/1; the BMC answers Off for /redfish/v1/Systems/2 (a multi-node
    BMC or a proxy mixing its answers): not this machine's word."""
    cluster(api)
    with _answering({"@odata.id": "/redfish/v1/Systems/2", "Id": "2", "PowerState": "Off"}) as other:
        result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: other.entry()}))

    assert untouched(api) and not freed(api)
    # What must happen (issue 37: `code != EXIT_OK` accepted exit 70, a crash): exit 1, fencing not confirmed
    # for the reason, in the log and in the node's Warning Event.
    assert result.code == EXIT_FAILED
    assert "the BMC's answer is not the entry's ComputerSystem (its @odata.id is another path)" in refusal(api)
    [line] = [line for line in result.logs if line["message"].startswith(f"fencing of node {SILENT} not confirmed")]
    assert "not the entry's ComputerSystem" in line["message"] and line["level"] == "ERROR"
    assert result.summary["failures"] == 1 and result.summary["powered_off"] == 0


@pytest.mark.parametrize("target", ["/redfish/v1/Systems/2/Actions/ComputerSystem.Reset",
                                    "/redfish/v1/Systems/1/%2e%2e/2/Actions/ComputerSystem.Reset",
                                    "/redfish/v1/Systems/1/../2/Actions/ComputerSystem.Reset"])
def test_a_reset_target_of_another_system_is_never_posted(api, run_pass, tmp_path, target):
    """The silent node's system answers On with a Reset target naming another system on the same BMC (a
    chassis manager, a multi-node BMC), plainly or by a way out of its own path: ForceOff must not go there,
    it would power off another machine. (Its UUID is the node's, written as some BMCs do: upper case, braces.)"""
    cluster(api)
    with _answering({"@odata.id": "/redfish/v1/Systems/1", "Id": "1", "PowerState": "On",
                     "UUID": "{" + fc.machine_uuid(SILENT).upper() + "}",
                     "Actions": {"#ComputerSystem.Reset": {"target": target}}}) as bmc:
        redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: bmc.entry(fc.machine_uuid(SILENT))}),
                     REDFISH_POWER_OFF="true", REDFISH_OFF_WAIT_SECONDS="1")
        posted = [line for line in bmc.request_lines if line.startswith("POST")]

    assert posted and not [line for line in posted if "/2/" in line or ".." in line or "%" in line], posted


LABEL = "node-restriction.kubernetes.io/bmc"  # no kubelet may set it on its own Node (NodeRestriction)


def _labelled(api, name: str, value: str) -> None:
    node = api.get("nodes", name)
    node["metadata"]["labels"][LABEL] = value
    api.add(node)


def test_two_nodes_carrying_one_bmc_key_are_not_proven_by_it(api, run_pass, tmp_path, bmc):
    """REDFISH_NODE_LABEL: node `silent` carries the value that keys node b's BMC (a copied label: no kubelet may
    set this key itself). b's machine is off; `silent` may run. One BMC cannot answer for two nodes: nothing is
    freed on either."""
    cluster(api)
    fc.live_node(api, "b")
    _labelled(api, SILENT, "rack-b")
    _labelled(api, "b", "rack-b")
    result = redfish_pass(run_pass, bmc_file(tmp_path, {"rack-b": bmc.entry("off")}), REDFISH_NODE_LABEL=LABEL)

    assert untouched(api) and not freed(api)
    assert result.code != EXIT_OK
    [message] = [e["message"] for e in api.objects("events")
                 if e["reason"] == "FencingFailed" and e["involvedObject"]["name"] == SILENT]
    assert "node b" in message, message


def test_off_from_a_machine_that_is_not_the_node_is_not_proof(api, run_pass, tmp_path, bmc):
    """Node `silent` was re-registered under the same name on a new machine; the map still names the old
    machine's BMC (and its uuid), which is off for good. The new machine is merely cut off. Its systemUUID is not
    the one the map names: that Off is not its own."""
    cluster(api)
    node = api.get("nodes", SILENT)
    assert node["status"]["nodeInfo"]["systemUUID"].lower() != bmc.ids["off"]
    result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: bmc.entry("off")}))

    assert untouched(api) and not freed(api), "freed on another machine's PowerState Off"
    assert result.code != EXIT_OK
    assert "systemUUID is not the uuid REDFISH_BMC_FILE names" in refusal(api), refusal(api)
    no_secret(result, api, bmc.endpoint("off"), bmc.ids["off"])


def test_another_machine_that_is_on_is_never_powered_off(api, run_pass, tmp_path, bmc):
    """The same with the other machine On and REDFISH_POWER_OFF=true: ForceOff would power off a machine
    that is not the node (and may run someone's workload). It is never posted."""
    cluster(api)
    result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: bmc.entry("other")}), REDFISH_POWER_OFF="true",
                          REDFISH_OFF_WAIT_SECONDS="1")

    assert bmc.power("other") == "On", "another machine was powered off"
    assert untouched(api) and result.code != EXIT_OK
    assert not [e for e in api.objects("events") if e["reason"] == "NodePoweredOff"]
    assert "systemUUID is not the uuid REDFISH_BMC_FILE names" in refusal(api), refusal(api)


@pytest.mark.parametrize("uuid_of, why", [
    ("node", "the node's status.nodeInfo.systemUUID is not the uuid REDFISH_BMC_FILE names"),
    ("system", "the BMC's ComputerSystem UUID is not the uuid REDFISH_BMC_FILE names"),
    ("both-zero", "the BMC's ComputerSystem UUID is not the uuid REDFISH_BMC_FILE names"),  # unset firmware
])
def test_a_uuid_missing_on_either_side_is_not_proof(api, run_pass, tmp_path, uuid_of, why):
    """Off with nothing to match the map's uuid by (a node object without systemUUID, a BMC without UUID, or the
    all-zero placeholder on both): whose Off it is cannot be told, so nothing is freed and nothing is powered
    off."""
    cluster(api)
    node, system = api.get("nodes", SILENT), {"@odata.id": "/redfish/v1/Systems/1", "Id": "1", "PowerState": "Off"}
    if uuid_of == "node":
        del node["status"]["nodeInfo"]["systemUUID"]
    if uuid_of != "system":
        system["UUID"] = fc.machine_uuid(SILENT)
    if uuid_of == "both-zero":
        node["status"]["nodeInfo"]["systemUUID"] = system["UUID"] = "00000000-0000-0000-0000-000000000000"
    api.add(node)
    with _answering(system) as other:
        result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: other.entry(fc.machine_uuid(SILENT))}))

    assert untouched(api) and not freed(api) and result.code != EXIT_OK
    assert why in refusal(api), refusal(api)


def test_uuids_are_compared_however_written():
    """The kubelet reports the SMBIOS product_uuid lowercase and dashed; BMCs answer upper case, some in braces."""
    from rwo_failover.model.names import same_uuid
    kubelet = "4c4c4544-0042-3510-8052-b4c04f4d4e32"
    for bmc_wrote in ("4C4C4544-0042-3510-8052-B4C04F4D4E32", "{4C4C4544-0042-3510-8052-B4C04F4D4E32}",
                      "4c4c454400423510 8052b4c04f4d4e32".replace(" ", "")):
        assert same_uuid(bmc_wrote) == same_uuid(kubelet) != ""
    for unusable in ("", None, 7, "4c4c4544", "zz4c4544-0042-3510-8052-b4c04f4d4e32",
                     "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF"):
        assert same_uuid(unusable) == ""


def test_healthy_opted_out_nodes_do_not_count_as_silent(api, run_pass, tmp_path, bmc):
    """Opted-out nodes' Leases were never read in this mode, so each healthy opted-out node counted as
    "silent" in the brake: 6 opted out (say, the control plane's), 4 live, 1 silent with a volume was refused
    (7 of 11) on every pass. docs/fencing.md says every node's Lease is read."""
    from rwo_failover.model.names import NODE_OPT_OUT_LABEL
    cluster(api, machine="off")
    for i in range(6):
        fc.live_node(api, f"cp{i}")
        _labelled_with(api, f"cp{i}", NODE_OPT_OUT_LABEL, "true")
    result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: bmc.entry("off")}))

    assert result.code == EXIT_OK, [line.get("message") for line in result.logs if line.get("level") != "INFO"]
    assert freed(api)


def _labelled_with(api, name: str, key: str, value: str) -> None:
    node = api.get("nodes", name)
    node["metadata"]["labels"][key] = value
    api.add(node)


def test_a_ca_that_is_no_certificate_fails_at_start_up(api, run_pass, tmp_path, bmc):
    """A `ca` with the PEM markers but no certificate inside passed start-up and then failed every pass's
    TLS, found out only at the first outage: the start-up check must load it (exit 2, the field named)."""
    from rwo_failover.run.exitcodes import EXIT_CONFIG
    cluster(api)
    entry = dict(bmc.entry("off"), ca="-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n")
    result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: entry}))

    assert result.code == EXIT_CONFIG, result.logs
    assert "ca" in result.stderr and "bm90IGEgY2VydA" not in result.stderr, result.stderr
    assert untouched(api)


def test_healthy_kubelets_with_long_leases_do_not_trip_the_silent_brake(api, run_pass, tmp_path, bmc):
    """Every kubelet has a 120 s Lease (renewed every 30 s); the 4 live ones renewed 25 s ago. They are
    heartbeating (judge_silent says so), and so not "silent" in the brake either: the one silent node
    (40 s) whose BMC answers Off is freed, not refused as 5 of 5."""
    for i in range(4):
        api.add(fc.node(f"w{i}", ready="True", since=86400))
        api.add(fc.lease(f"w{i}", 25, duration=120))
    api.add(fc.node(SILENT, ready="True", since=3600, machine="off"))
    api.add(fc.lease(SILENT, 40, duration=120))
    fc.add_volume(api, "data-db-0", attached_to=SILENT)
    api.add(fc.pod("db-0", SILENT, claims=["data-db-0"], ready="True"))
    result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: bmc.entry("off")}))

    assert result.code == EXIT_OK, [line.get("message") for line in result.logs if line.get("level") != "INFO"]
    assert freed(api)


def test_a_node_already_powered_off_and_freed_is_left_out_as_idle(api, run_pass, tmp_path, bmc):
    """Not a defect of i29 but the guard on e27b513's fix: a node that an earlier pass proved off through its
    BMC (our out-of-service taint), still silent, holding nothing, is proven down as a stopped instance is,
    and left out; only merely silent nodes are never left out. 1 live, 1 freed long ago, 1 newly silent
    with a volume: 1 of 2 counted, not refused."""
    fc.live_node(api, "w0")
    added = "2026-11-21T10:00:00Z"
    api.add(fc.mark_ours(api, fc.node("gone", ready="Unknown", since=3600, taints=[fc.our_taint(added)]), added))
    api.add(fc.lease("gone", 3600))
    from test_redfish import silent_node
    silent_node(api, machine="off")
    result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: bmc.entry("off"),
                                                        "gone": bmc.entry("off", uuid=fc.machine_uuid("gone"))}))

    assert result.code == EXIT_OK, [line.get("message") for line in result.logs if line.get("level") != "INFO"]
    assert freed(api)
