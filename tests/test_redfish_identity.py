"""FENCING=redfish: which machine answers for a node is the operator's word (issue 35, holes 2 and 4), never the
node's. The BMC map carries each machine's identity (uuid, serial); a label a kubelet may set on its own Node never
keys it; a systemUUID two nodes report identifies neither; and the key and UUID the plan judged unique must still
be the node's, read live, when its BMC is asked. Against sushy-tools' emulator and the fixture API server."""

from __future__ import annotations

import json

import pytest
from test_redfish import SILENT, bmc_file, cluster, freed, redfish_pass, refusal, untouched

from rwo_failover.run.exitcodes import EXIT_CONFIG, EXIT_FAILED
from rwo_testkit import fake_cluster as fc
from rwo_testkit.redfish_bmc import RedfishEmulator, _RawTLS

LABEL = "node-restriction.kubernetes.io/bmc"


@pytest.fixture(scope="module")
def bmc():
    with RedfishEmulator({"own": "On", "neighbour": "On", "off": "Off"}) as emulator:
        yield emulator


def powered_off(api) -> list[dict]:
    return [e for e in api.objects("events") if e["reason"] == "NodePoweredOff"]


# --- the map: each entry names its machine, and one machine answers for one entry ---------------------------

@pytest.mark.parametrize("entry, says", [
    ({}, "entry 'silent' has neither uuid nor serial"),
    ({"uuid": "03000200-0400-0500-0006-000700080009"}, "not a UUID one machine alone carries"),
    ({"uuid": "00000000-0000-0000-0000-000000000000"}, "give serial instead"),
    ({"uuid": "not-a-uuid"}, "not a UUID one machine alone carries"),
    ({"serial": ""}, "has a serial that is not a non-empty string"),
])
def test_a_map_entry_without_a_machine_s_own_identity_is_refused_at_start_up(api, run_pass, tmp_path, bmc, entry,
                                                                              says):
    cluster(api, machine="off")
    found = {k: v for k, v in bmc.entry("off").items() if k != "uuid"}
    result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: {**found, **entry}}))

    assert result.code == EXIT_CONFIG and result.requests == []
    assert "REDFISH_BMC_FILE" in result.stderr and says in result.stderr, result.stderr
    assert bmc.ids["off"] not in result.stderr


def test_two_entries_naming_one_machine_are_refused_at_start_up(api, run_pass, tmp_path, bmc):
    cluster(api, machine="off")
    result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: bmc.entry("off"), "w0": bmc.entry("off")}))

    assert result.code == EXIT_CONFIG and result.requests == []
    assert "entries 'silent' and 'w0' name the same uuid" in result.stderr, result.stderr


# --- hole 2: a node gets another, live machine powered off -----------------------------------------------------

def test_a_node_that_takes_another_s_key_and_uuid_after_the_plan_never_gets_it_powered_off(api, run_pass, tmp_path,
                                                                                          bmc):
    """The silent node carries key `own`; between the plan and the live read it relabels itself `neighbour` and
    copies the neighbour's systemUUID (as a kubelet may, where the label is one it may set: ALLOW_UNSAFE here, so
    the start-up refusal does not stop the attempt). The neighbour is Ready with a fresh Lease. Its machine stays
    On, nothing is freed, and the FencingFailed Warning says the key changed since the plan."""
    cluster(api, machine="own")
    fc.live_node(api, "neighbour")
    for name, key in ((SILENT, "own"), ("neighbour", "neighbour")):
        node = api.get("nodes", name)
        node["metadata"]["labels"]["bmc.example.com/name"] = key
        node["status"]["nodeInfo"]["systemUUID"] = bmc.ids["own" if name == SILENT else "neighbour"]
        api.add(node)
    listed = []

    def turn_on_the_live_read(req):
        if req.verb == "list" and req.resource == "nodes":
            listed.append(req)
        elif req.verb == "get" and req.resource == "nodes" and req.name == SILENT and listed:
            node = api.get("nodes", SILENT)
            node["metadata"]["labels"]["bmc.example.com/name"] = "neighbour"
            node["status"]["nodeInfo"]["systemUUID"] = bmc.ids["neighbour"]
            api.add(node)
        return None
    api.hooks.append(turn_on_the_live_read)

    result = redfish_pass(run_pass, bmc_file(tmp_path, {"own": bmc.entry("own"), "neighbour": bmc.entry("neighbour")}),
                          REDFISH_NODE_LABEL="bmc.example.com/name", ALLOW_UNSAFE="kubelet-label",
                          REDFISH_POWER_OFF="true", REDFISH_OFF_WAIT_SECONDS="1")

    assert bmc.power("neighbour") == "On", "a live machine was powered off"
    assert powered_off(api) == [] and untouched(api) and not freed(api)
    assert result.code == EXIT_FAILED
    assert "changed since the plan judged them unique" in refusal(api), refusal(api)


def test_the_map_s_uuid_not_the_node_s_decides_which_machine_answers(api, run_pass, tmp_path):
    """A BMC that answers for the node's own claimed UUID, but not the one the map names: the node's word is not
    the machine's identity. Nothing is powered off, nothing freed."""
    cluster(api)
    system = {"@odata.id": "/redfish/v1/Systems/1", "Id": "1", "PowerState": "Off", "UUID": fc.machine_uuid(SILENT)}
    raw = json.dumps(system).encode()
    with _RawTLS(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close"
                 b"\r\n\r\n" % len(raw) + raw) as other:
        result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: other.entry(fc.machine_uuid("another"))}))

    assert untouched(api) and not freed(api) and result.code == EXIT_FAILED
    assert "ComputerSystem UUID is not the uuid REDFISH_BMC_FILE names" in refusal(api), refusal(api)


@pytest.mark.parametrize("serial, proven", [("SN-4711", True), ("SN-0815", False)])
def test_a_serial_names_the_machine_where_its_uuid_cannot(api, run_pass, tmp_path, serial, proven):
    """A board whose firmware left its UUID at a default many share: the entry names its serial instead, and only
    the machine with that SerialNumber proves anything."""
    cluster(api)
    node = api.get("nodes", SILENT)
    node["status"]["nodeInfo"]["systemUUID"] = "03000200-0400-0500-0006-000700080009"
    api.add(node)
    system = {"@odata.id": "/redfish/v1/Systems/1", "Id": "1", "PowerState": "Off", "SerialNumber": serial,
              "UUID": "03000200-0400-0500-0006-000700080009"}
    raw = json.dumps(system).encode()
    with _RawTLS(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close"
                 b"\r\n\r\n" % len(raw) + raw) as other:
        entry = {k: v for k, v in other.entry().items() if k != "uuid"}
        result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: dict(entry, serial="SN-4711")}))

    assert freed(api) is proven
    if not proven:
        assert result.code == EXIT_FAILED and "SerialNumber is not the serial" in refusal(api), refusal(api)


# --- hole 4: a systemUUID two machines report is no machine's identity ------------------------------------------

def test_a_system_uuid_two_nodes_report_proves_neither(api, run_pass, tmp_path, bmc):
    """Cloned VM templates: the silent node and a live one report the same systemUUID. The map entry for the
    silent node names the wrong BMC (the live node's machine, the very mistake the UUID check exists to catch) with
    that shared UUID. Nothing is powered off and nothing is freed; the Warning names the twin."""
    cluster(api, machine="neighbour")
    api.add(fc.node("twin", ready="True", since=86400, machine="neighbour"))
    api.add(fc.lease("twin", 3))
    result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: bmc.entry("neighbour")}),
                          REDFISH_POWER_OFF="true", REDFISH_OFF_WAIT_SECONDS="1")

    assert bmc.power("neighbour") == "On", "the live twin's machine was powered off"
    assert powered_off(api) == [] and untouched(api) and not freed(api)
    assert result.code == EXIT_FAILED
    assert "node twin reports the same status.nodeInfo.systemUUID" in refusal(api), refusal(api)
