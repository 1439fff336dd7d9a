"""A systemUUID two nodes report proves neither (issue 35, hole 4), but only where the machine's identity rests on
it: a map entry that names its machine by `serial` (the remedy for UUIDs many machines share) is matched by the
serial its BMC reports, whatever any node's status says. Found by an attack on the hole-4 fix, which refused such a
node for good because another node (a clone, or one copying the value: status is its kubelet's to write)
reported its UUID."""

from __future__ import annotations

import json

from test_redfish import SILENT, bmc_file, cluster, freed, redfish_pass

from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit import fake_cluster as fc
from rwo_testkit.redfish_bmc import _RawTLS

CLONED = fc.machine_uuid("vm-template-7")  # a UUID a cloned VM template left on every clone: no placeholder


def off_bmc(serial: str, uuid: str) -> _RawTLS:
    system = {"@odata.id": "/redfish/v1/Systems/1", "Id": "1", "PowerState": "Off", "SerialNumber": serial,
              "UUID": uuid}
    raw = json.dumps(system).encode()
    return _RawTLS(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close"
                   b"\r\n\r\n" % len(raw) + raw)


def test_a_serial_named_machine_that_answers_off_is_freed_whatever_another_node_reports(api, run_pass, tmp_path):
    """The silent node's machine, named in the map by its serial, answers PowerState Off with that serial. A live
    node (a clone, or one whose kubelet copies the silent node's systemUUID: status is its own to write) reports the
    same systemUUID. The silent node is never freed, on any pass."""
    cluster(api)
    for name in (SILENT, "w0"):
        node = api.get("nodes", name)
        node["status"]["nodeInfo"]["systemUUID"] = CLONED
        api.add(node)
    with off_bmc("SN-4711", CLONED) as bmc:
        entry = {k: v for k, v in bmc.entry().items() if k != "uuid"}
        result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: dict(entry, serial="SN-4711")}))

    assert freed(api) and result.code == EXIT_OK, (
        "a machine its BMC proves Off (by the serial the operator named) is never freed because another node "
        "reports the same systemUUID: "
        f"{[e['message'] for e in api.objects('events') if e['reason'] == 'FencingFailed']}")


def test_without_the_twin_the_same_node_is_freed(api, run_pass, tmp_path):
    cluster(api)
    node = api.get("nodes", SILENT)
    node["status"]["nodeInfo"]["systemUUID"] = CLONED
    api.add(node)
    with off_bmc("SN-4711", CLONED) as bmc:
        entry = {k: v for k, v in bmc.entry().items() if k != "uuid"}
        result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: dict(entry, serial="SN-4711")}))

    assert freed(api) and result.code == EXIT_OK
