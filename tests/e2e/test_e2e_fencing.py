"""Fencing on a real control plane (issue 14): the NetworkFence CRD installed, a simulated csi-addons
controller answering in 2 s (as upstream's: a result and a message, no observedGeneration), the optional RBAC
component applied, and the reconciler as its ServiceAccount. Then the fence webhook, served over verified TLS
on loopback, answering as its contract says (docs/fencing.md).
"""

from __future__ import annotations

import pytest

from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit import log_sink
from rwo_testkit.e2e import OOS_KEY, REPO, outage, record, wait_for
from rwo_testkit.fence_server import FenceServer
from rwo_testkit.node_sim import FenceController

pytestmark = pytest.mark.e2e
FENCES = "/apis/csiaddons.openshift.io/v1alpha1/networkfences"


@pytest.fixture(scope="module")
def sa(cluster):
    cluster.kubectl("apply", "-f", str(REPO / "rwo_testkit" / "crds" / "networkfence.yaml"))
    cluster.kubectl("wait", "--for=condition=Established", "crd/networkfences.csiaddons.openshift.io",
                    "--timeout=60s")
    for name in ("live-a", "live-b"):
        cluster.sim.add_node(name)
    kubeconfig = cluster.install_rbac()
    cluster.kubectl("apply", "-f", str(REPO / "deploy" / "components" / "networkfence" / "rbac.yaml"))
    return kubeconfig


def internal_ip(cluster, node: str) -> str:
    return next(a["address"] for a in cluster.node(node)["status"]["addresses"] if a["type"] == "InternalIP")


def test_fence_act_recover_unfence_delete_with_networkfence(cluster, sa):
    cluster.sim.add_node("f-node")
    cluster.statefulset("fenced", "db", node_affinity="f-node")
    env = {"FENCING": "networkfence", "NETWORK_FENCE_CLASS": "sim-fence", "RECOVERY_SECONDS": "5"}
    codes: list[int] = []
    uid = wait_for("fenced/db-0 running", lambda: cluster.running("fenced", "db-0"), 60)["metadata"]["uid"]

    def act():
        codes.append(cluster.run_pass(sa, **env).code)
        fence = cluster.kube.get(f"{FENCES}/f-node")
        if fence is None or (fence.get("status") or {}).get("result") != "Succeeded":
            pod = cluster.pod("fenced", "db-0")
            assert pod is not None and pod["metadata"]["uid"] == uid, "nothing is touched before the fence holds"
    with FenceController(cluster.kubeconfig, delay=2.0):
        timing = outage(cluster, "fenced", "db", node="f-node", act=act)
        assert timing is not None and set(codes) == {EXIT_OK}, codes
        fence = cluster.kube.get(f"{FENCES}/f-node")
        assert fence["spec"]["fenceState"] == "Fenced"
        assert fence["spec"]["cidrs"] == [f"{internal_ip(cluster, 'f-node')}/32"]
        record(f"seed outage, networkfence (controller answers in 2 s): {timing.from_taint:.0f}s after the "
               f"shutdown taint, {timing.from_power_off:.0f}s after power-off")

        cluster.sim.power_on("f-node")
        cluster.untaint("f-node", "node.cloudprovider.kubernetes.io/shutdown")
        wait_for("f-node Ready", lambda: cluster.ready("f-node") == "True", 30)
        states: list[str] = []

        def undone():
            result = cluster.run_pass(sa, **env)
            assert result.code == EXIT_OK, result.logs
            fence = cluster.kube.get(f"{FENCES}/f-node")
            states.append(fence["spec"]["fenceState"] if fence else "deleted")
            return fence is None and not any(t["key"] == OOS_KEY for t in cluster.taints("f-node"))
        wait_for("unfenced, the NetworkFence deleted, then our taint removed", undone, 90, every=2)
    assert "Unfenced" in states and states.index("Unfenced") < states.index("deleted")
    cluster.sim.remove_node("f-node")


def test_the_fence_webhook_over_verified_tls(cluster, sa, tmp_path):
    cluster.sim.add_node("w-node")
    cluster.statefulset("hooked", "db", node_affinity="w-node")
    token = tmp_path / "token"
    token.write_text(log_sink.plant("e2e-fence-token"))
    with FenceServer() as fencer:
        env = {"FENCING": "webhook", "FENCE_WEBHOOK_URL": fencer.url, "FENCE_WEBHOOK_CA_FILE": fencer.ca_file,
               "FENCE_WEBHOOK_TOKEN_FILE": str(token)}
        codes: list[int] = []
        timing = outage(cluster, "hooked", "db", node="w-node",
                        act=lambda: codes.append(cluster.run_pass(sa, **env).code))
        assert timing is not None and set(codes) == {EXIT_OK}, codes
        assert fencer.requests and fencer.requests[0]["body"]["node"] == "w-node"
        assert fencer.requests[0]["body"]["addresses"] == [internal_ip(cluster, "w-node")]
        assert fencer.requests[0]["headers"]["Authorization"] == "Bearer e2e-fence-token"
    record(f"seed outage, fence webhook: {timing.from_taint:.0f}s after the shutdown taint, "
           f"{timing.from_power_off:.0f}s after power-off")
    cluster.sim.remove_node("w-node")
