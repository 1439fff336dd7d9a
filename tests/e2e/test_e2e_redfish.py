"""FENCING=redfish on a real control plane, with sushy-tools' Redfish emulator as the nodes' BMCs.

The simulated node's kubelet stops (rwo_testkit/node_sim.py: no Lease, no status); no shutdown taint is ever
added, and the node is freed before the node lifecycle controller's grace runs out, on the BMC's word alone:
- a power cut: the BMC answers PowerState Off when asked;
- a hung machine: the BMC answers On, REDFISH_POWER_OFF=true powers it off (the fake driver applies ForceOff
  1 to 11 s later), and the pass waits for Off.
The reconciler runs as deployed (rbac.yaml, its ServiceAccount's token), one `--once` pass every 2 s.
"""

from __future__ import annotations

import json
import time

import pytest

from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit import log_sink
from rwo_testkit.e2e import OOS_KEY, record, wait_for
from rwo_testkit.redfish_bmc import PASSWORD, RedfishEmulator

pytestmark = pytest.mark.e2e
SILENT_SECONDS = 6  # the simulated kubelet renews its 10 s Lease every 2.5 s; the grace here is 20 s


@pytest.fixture(scope="module")
def setup(cluster, tmp_path_factory):
    for name in ("rf-live-a", "rf-live-b"):
        cluster.sim.add_node(name)
    kubeconfig = cluster.install_rbac()
    with RedfishEmulator({"rf-cut": "Off", "rf-hung": "On"}) as bmc:
        path = tmp_path_factory.mktemp("bmc") / "bmc.json"
        path.write_text(json.dumps({name: bmc.entry(name) for name in ("rf-cut", "rf-hung")}))
        log_sink.plant(PASSWORD)
        yield kubeconfig, str(path), bmc


def failover(cluster, kubeconfig, bmc_file: str, node: str, namespace: str, **env: str) -> tuple[float, list[int]]:
    """Stop the node's kubelet, pass every 2 s; seconds until the replacement is Running with its volume
    attached elsewhere, and the exit codes of the passes."""
    cluster.sim.add_node(node)
    cluster.statefulset(namespace, "db", node_affinity=node)
    old = wait_for(f"{namespace}/db-0 running", lambda: cluster.running(namespace, "db-0"), 60)
    assert old["spec"]["nodeName"] == node
    pv = f"pv-{namespace}-db"
    wait_for("the volume attached", lambda: cluster.attached(pv, node), 30)
    settings = {"FENCING": "redfish", "REDFISH_BMC_FILE": bmc_file, "REDFISH_SILENT_SECONDS": str(SILENT_SECONDS),
                **env}
    codes: list[int] = []
    off = time.monotonic()
    cluster.sim.power_off(node)
    while time.monotonic() < off + 120:
        result = cluster.run_pass(kubeconfig, **settings)
        codes.append(result.code)
        assert all(t["key"] != "node.cloudprovider.kubernetes.io/shutdown" for t in cluster.taints(node))
        new: dict | None = cluster.running(namespace, "db-0", not_on=node, not_uid=old["metadata"]["uid"])
        if new and cluster.attached(pv, new["spec"]["nodeName"]):
            return time.monotonic() - off, codes
        time.sleep(2)
    raise AssertionError(f"no replacement within 120 s; exit codes {codes}")


def test_a_power_cut_the_bmc_reports_off_is_freed_before_not_ready(cluster, setup):
    kubeconfig, path, bmc = setup
    took, codes = failover(cluster, kubeconfig, path, "rf-cut", "redfish-cut")
    assert set(codes) == {EXIT_OK}, codes
    assert any(t["key"] == OOS_KEY for t in cluster.taints("rf-cut")), "our out-of-service taint"
    record(f"redfish, a power cut the BMC reports Off (REDFISH_SILENT_SECONDS={SILENT_SECONDS}, grace 20 s): "
           f"{took:.0f}s from power-off to the replacement Running")
    assert took <= 30, f"{took:.0f} s"


def test_a_hung_machine_is_powered_off_through_its_bmc_then_freed(cluster, setup):
    kubeconfig, path, bmc = setup
    took, codes = failover(cluster, kubeconfig, path, "rf-hung", "redfish-hung", REDFISH_POWER_OFF="true",
                           PASS_TIMEOUT_SECONDS="45")
    assert bmc.power("rf-hung") == "Off"
    assert set(codes) == {EXIT_OK}, codes
    record(f"redfish, a hung machine powered off through its BMC (ForceOff applied 1-11 s later): {took:.0f}s "
           "from the kubelet's stop to the replacement Running")
