"""A real node identity (issue 35): what a node's own kubelet credential may write on a real API server, and
that nothing it may write makes a pass untaint, power off or release what the node itself may not.

The control plane runs the Node and RBAC authorizers and the NodeRestriction admission plugin. Each node here
acts with its own client certificate for `system:node:NAME` in `system:nodes`, signed by the test CA
(rwo_testkit/node_identity.py: a simulated kubelet whose every write the server judges as a real kubelet's).
The first tests record what the server answers such a node (200 or 403, asserted); the forgeries then try what
it allows against real passes (`reconcile.py --once`, the ServiceAccount of rbac.yaml):

1. a human's out-of-service taint, with rwo-failover 0.1's provenance annotations forged by the node: kept;
2. a node we tainted for real comes back and claims a reboot (a new bootID): lifted under UNDO=bootid (the
   documented limit), kept under UNDO=operator until an admin's label, which the node cannot set;
3. FENCING=redfish: the node cannot relabel itself to another machine's BMC entry, and the right machine is
   powered off.
The last tests record what a kubelet may do to its own Node object (docs/safety.md, Known limits).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest

from rwo_failover.act.events import repeated_name
from rwo_failover.model.names import POWER_CYCLED_ANNOTATION, TAINT_RECORD_LABEL, kubelet_may_set
from rwo_failover.model.taint_record import record_name
from rwo_failover.run.exitcodes import EXIT_CONFIG, EXIT_OK, EXIT_REFUSED
from rwo_testkit import log_sink
from rwo_testkit.control_plane import NODE_MONITOR_GRACE_SECONDS
from rwo_testkit.e2e import CLOUD_TAINT, LEASE_SECONDS, OOS_KEY, record, wait_for
from rwo_testkit.kube import STRATEGIC
from rwo_testkit.node_identity import OwnKubelet, answer
from rwo_testkit.redfish_bmc import PASSWORD, RedfishEmulator

pytestmark = pytest.mark.e2e
RECORDS = "rwo-failover"  # RECOVERY_NAMESPACE's default: our taint records, recovery records, control ConfigMap
BMC_LABEL = "node-restriction.kubernetes.io/bmc"
OOS_VALUE = "nodeshutdown"
RECOVERY_SECONDS = "5"  # how long a node that came back is Ready before our taint may come off (60 by default)
OUR_MANAGER = "rwo-failover"  # the field manager of our writes: our User-Agent up to its first '/'


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module", autouse=True)
def timed() -> Iterator[None]:
    """The module's wall time, its control plane's start and stop included, among the tier's figures."""
    began = time.monotonic()
    yield
    record(f"node identity: test_e2e_node_identity.py took {time.monotonic() - began:.0f}s (one control plane)")


@pytest.fixture(scope="module")
def sa(cluster):
    for name in ("live-a", "live-b", "live-c"):
        cluster.sim.add_node(name)
    return cluster.install_rbac()


@contextmanager
def own_kubelet(cluster, name: str) -> Iterator[OwnKubelet]:
    """Node `name`, registered and kept alive by its own kubelet credential; the admin removes it afterwards."""
    with OwnKubelet(cluster.cp, name, LEASE_SECONDS) as kubelet:
        kubelet.register()
        try:
            wait_for(f"{name} Ready", lambda: cluster.ready(name) == "True", 30)
            # and the node lifecycle controller done with its registration taint (not-ready:NoSchedule)
            wait_for(f"{name} untainted", lambda: not cluster.taints(name), 30)
            yield kubelet
            assert kubelet.refused == [], "the simulated kubelet needs no write that NodeRestriction refuses"
        finally:
            kubelet.remove()


def events_about(cluster, node: str, reason: str) -> list[dict]:
    return [e for e in cluster.kube.items("/api/v1/namespaces/default/events",
                                          fieldSelector=f"involvedObject.name={node}") if e["reason"] == reason]


def taint_records(cluster) -> dict[str, dict]:
    found = cluster.kube.items(f"/api/v1/namespaces/{RECORDS}/configmaps", labelSelector=TAINT_RECORD_LABEL)
    return {r["metadata"]["name"]: json.loads(r["data"]["record"]) for r in found}


def our_writes(node: dict) -> list[dict]:
    return [m for m in node["metadata"].get("managedFields") or () if m.get("manager") == OUR_MANAGER]


# --- What the real server lets a node write with its own credential ------------------------------------------

@pytest.fixture(scope="class")
def me(cluster, sa):
    """Node id-self, its own kubelet; and id-other, the admin simulator's. Gone after the class's tests."""
    cluster.sim.add_node("id-other")
    with own_kubelet(cluster, "id-self") as kubelet:
        yield kubelet
    cluster.sim.remove_node("id-other")


class TestWhatANodeMayWrite:
    """Facts of v1.36's Node authorizer and NodeRestriction, asserted as the server answers them."""

    def test_the_server_knows_it_as_a_kubelet(self, cluster, me):
        """Its client certificate authenticates it as the Node authorizer and NodeRestriction expect."""
        review = me.kube.create("/apis/authentication.k8s.io/v1/selfsubjectreviews", {
            "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        user = review["status"]["userInfo"]
        assert user["username"] == "system:node:id-self" and "system:nodes" in user["groups"], user

    def test_its_own_taints_never(self, cluster, me):
        """Adding, removing or changing the out-of-service taint: 403 through the Node and its status alike."""
        path = f"/api/v1/nodes/{me.name}"
        human = {"key": OOS_KEY, "value": OOS_VALUE, "effect": "NoExecute", "timeAdded": now_text()}
        before = cluster.taints(me.name)
        for via in (path, f"{path}/status"):
            status, why = answer(me.kube, "PATCH", via, body={"spec": {"taints": before + [human]}})
            assert (status, why) == (403, f'nodes "{me.name}" is forbidden: node "{me.name}" is not allowed to '
                                          "modify taints"), via
        cluster.taint(me.name, human)  # an admin's
        try:
            tainted = cluster.taints(me.name)
            others = [t for t in tainted if t["key"] != OOS_KEY]
            tries = {"remove it": others, "change its value": others + [dict(human, value="forged")],
                     "change its timeAdded": others + [dict(human, timeAdded="2020-01-01T00:00:00Z")],
                     "add another": tainted + [{"key": "example.com/x", "effect": "NoSchedule"}]}
            for what, taints in tries.items():
                for via in (path, f"{path}/status"):
                    assert answer(me.kube, "PATCH", via, body={"spec": {"taints": taints}})[0] == 403, (what, via)
            assert [t for t in cluster.taints(me.name) if t["key"] == OOS_KEY] == \
                [t for t in tainted if t["key"] == OOS_KEY], "the admin's taint, as it was"
        finally:
            cluster.untaint(me.name, OOS_KEY)

    @pytest.mark.parametrize("key, allowed", [
        ("bmc.example.com/name", True), ("rwo-failover.io/opt-out", True), ("kubernetes.io/hostname", True),
        ("topology.kubernetes.io/zone", True), ("node.kubernetes.io/instance-type", True),
        ("kubelet.kubernetes.io/anything", True), ("no-prefix", True),
        (BMC_LABEL, False), ("node-role.kubernetes.io/worker", False),
        ("example.kubernetes.io/x", False), ("example.k8s.io/x", False), ("kubernetes.io/x", False)])
    def test_its_own_labels_but_the_restricted_ones(self, cluster, me, key, allowed):
        """NodeRestriction's label rule, key by key; model.names.kubelet_may_set (what start-up refuses as
        REDFISH_NODE_LABEL) says the same for each. A restricted label an admin set, the node can neither change
        nor remove."""
        path = f"/api/v1/nodes/{me.name}"
        was = (cluster.node(me.name)["metadata"].get("labels") or {}).get(key)
        status, why = answer(me.kube, "PATCH", path, body={"metadata": {"labels": {key: "set-by-the-node"}}})
        try:
            assert kubelet_may_set(key) is allowed
            if allowed:
                assert status == 200, why
                assert cluster.node(me.name)["metadata"]["labels"][key] == "set-by-the-node"
                return
            assert (status, why) == (403, f'nodes "{me.name}" is forbidden: is not allowed to modify labels: {key}')
            cluster.kube.patch(path, {"metadata": {"labels": {key: "set-by-an-admin"}}})
            for value in ("set-by-the-node", None):
                assert answer(me.kube, "PATCH", path, body={"metadata": {"labels": {key: value}}})[0] == 403
            assert cluster.node(me.name)["metadata"]["labels"][key] == "set-by-an-admin"
        finally:
            cluster.kube.patch(path, {"metadata": {"labels": {key: was}}})

    def test_every_annotation_on_itself(self, cluster, me):
        """rwo-failover 0.1's provenance annotations among them: which is why 0.2 reads them no more."""
        path = f"/api/v1/nodes/{me.name}"
        forged = {"rwo-failover.io/out-of-service-added-at": now_text(),
                  "rwo-failover.io/out-of-service-applied-by": "rwo-failover",
                  "rwo-failover.io/taint-node-uid": cluster.node(me.name)["metadata"]["uid"],
                  "rwo-failover.io/taint-boot-id": "an-older-boot", "rwo-failover.io/taint-addresses": "x",
                  "rwo-failover.io/opt-out": "true", "node.alpha.kubernetes.io/ttl": "0",
                  "example.com/anything": "x"}
        assert answer(me.kube, "PATCH", path, body={"metadata": {"annotations": forged}}) == (200, "")
        annotations = cluster.node(me.name)["metadata"]["annotations"]
        assert {k: annotations.get(k) for k in forged} == forged
        cluster.kube.patch(path, {"metadata": {"annotations": dict.fromkeys(forged)}})

    def test_its_status_bootid_systemuuid_addresses_and_ready_unknown(self, cluster, me):
        path = f"/api/v1/nodes/{me.name}/status"
        me.node.last_status = time.monotonic() + 3600  # its kubelet loop posts nothing meanwhile
        try:
            forged = {"nodeInfo": {"bootID": "claimed-boot", "systemUUID": "03000200-0400-0500-0006-000700080009"},
                      "addresses": [{"type": "InternalIP", "address": "10.99.0.3"}],  # live-a's
                      "conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                                      "message": "Kubelet stopped posting node status."}]}
            assert answer(me.kube, "PATCH", path, body={"status": forged}, content_type=STRATEGIC) == (200, "")
            status = cluster.node(me.name)["status"]
            assert status["nodeInfo"]["bootID"] == "claimed-boot"
            assert status["nodeInfo"]["systemUUID"] == forged["nodeInfo"]["systemUUID"]
            assert {"type": "InternalIP", "address": "10.99.0.3"} in status["addresses"]
            assert [c["status"] for c in status["conditions"] if c["type"] == "Ready"] == ["Unknown"]
        finally:
            me.node.last_status = 0.0

    def test_its_provider_id_while_it_is_empty(self, cluster, me):
        """Not only at registration: a kubelet may set spec.providerID (passed on to the fence webhook) while
        none is set; the API server's validation keeps it once set."""
        path = f"/api/v1/nodes/{me.name}"
        assert answer(me.kube, "PATCH", path, body={"spec": {"providerID": "sim://id-self"}}) == (200, "")
        status, why = answer(me.kube, "PATCH", path, body={"spec": {"providerID": "sim://another"}})
        assert status == 422 and "providerID" in why, why
        assert cluster.node(me.name)["spec"]["providerID"] == "sim://id-self"

    def test_its_own_lease_and_no_other(self, cluster, me):
        leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
        renew = {"spec": {"renewTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}
        assert answer(me.kube, "PATCH", f"{leases}/{me.name}", body=renew) == (200, "")
        assert answer(me.kube, "PATCH", f"{leases}/id-other", body=renew)[0] == 403
        assert answer(me.kube, "DELETE", f"{leases}/id-other")[0] == 403

    def test_nothing_of_another_node(self, cluster, me):
        path = "/api/v1/nodes/id-other"
        status, why = answer(me.kube, "GET", path)
        assert status == 403 and "only its own Node" in why, why  # not even a read, on v1.36
        writes = {"labels": (path, {"metadata": {"labels": {"bmc.example.com/name": "x"}}}),
                  "annotations": (path, {"metadata": {"annotations": {"x": "y"}}}),
                  "taints": (path, {"spec": {"taints": [dict(CLOUD_TAINT)]}}),
                  "status": (f"{path}/status", {"status": {"nodeInfo": {"bootID": "x"}}})}
        for what, (where, body) in writes.items():
            status, why = answer(me.kube, "PATCH", where, body=body)
            assert (status, why) == (403, 'nodes "id-other" is forbidden: node "id-self" is not allowed to modify '
                                          'node "id-other"'), what
        assert answer(me.kube, "DELETE", path)[0] == 403
        assert "x" not in (cluster.node("id-other")["metadata"].get("annotations") or {})

    def test_nothing_in_the_recovery_namespace(self, cluster, me):
        """Our taint records, recovery records and the control ConfigMap (the pause switch): neither written nor
        read by a node (the Node authorizer lets it read only ConfigMaps its own pods mount)."""
        uid = cluster.node(me.name)["metadata"]["uid"]
        ours = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": record_name(uid), "labels": {TAINT_RECORD_LABEL: "true"}}, "data": {"record": "{}"}}
        base = f"/api/v1/namespaces/{RECORDS}/configmaps"
        cluster.kube.create(base, ours)
        try:
            calls = {"get": ("GET", f"{base}/{record_name(uid)}", None),
                     "list": ("GET", base, None),
                     "patch": ("PATCH", f"{base}/{record_name(uid)}", {"data": {"record": "forged"}}),
                     "delete": ("DELETE", f"{base}/{record_name(uid)}", None),
                     "create a record": ("POST", base, dict(ours, metadata={"name": "rwo-taint-x"})),
                     "create the control ConfigMap": ("POST", base, {
                         "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rwo-failover-control"},
                         "data": {"paused": "true"}})}
            for what, (method, where, body) in calls.items():
                status, why = answer(me.kube, method, where, body=body)
                assert status == 403 and f'User "system:node:{me.name}"' in why, (what, why)
            assert cluster.kube.get(f"{base}/{record_name(uid)}")["data"] == {"record": "{}"}
        finally:
            cluster.kube.delete(f"{base}/{record_name(uid)}")

    def test_events_about_any_node_in_any_name(self, cluster, me):
        """The Node authorizer lets a kubelet create and patch Events, about any object: one reported as
        rwo-failover's, about another node, is accepted."""
        event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "id-other.forged", "namespace": "default"},
                 "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": "id-other"}, "type": "Warning",
                 "reason": "ShutdownTaintOnLiveNode", "message": "written by id-self", "count": 1,
                 "source": {"component": "rwo-failover"}, "firstTimestamp": now_text(), "lastTimestamp": now_text()}
        path = "/api/v1/namespaces/default/events"
        assert answer(me.kube, "POST", path, body=event) == (201, "")
        assert answer(me.kube, "PATCH", f"{path}/id-other.forged", body={"count": 5}) == (200, "")
        cluster.kube.delete(f"{path}/id-other.forged")


# --- Forgery 1: a human's taint made to look ours -------------------------------------------------------------

def test_forged_01_provenance_never_makes_a_pass_remove_a_humans_out_of_service_taint(cluster, sa):
    """rwo-failover 0.1 took an out-of-service taint for its own when the Node's annotations said so; its kubelet
    may write them. Here it writes every one (the taint's timeAdded, its own uid, an older bootID) on a node an
    admin tainted while it runs: the pass refuses the live node under a shutdown taint that is not ours (exit 3,
    a ShutdownTaintOnLiveNode Warning), and writes nothing to it. RECOVERY_SECONDS=0: no wait stands between
    a taint taken for ours and its removal."""
    with own_kubelet(cluster, "forger") as kubelet:
        node = cluster.node("forger")
        human = {"key": OOS_KEY, "value": OOS_VALUE, "effect": "NoExecute", "timeAdded": now_text()}
        cluster.taint("forger", human)  # an admin's, on a running machine
        [taint] = [t for t in cluster.taints("forger") if t["key"] == OOS_KEY]
        forged = {"rwo-failover.io/out-of-service-added-at": taint["timeAdded"],
                  "rwo-failover.io/out-of-service-applied-by": "rwo-failover",
                  "rwo-failover.io/taint-node-uid": node["metadata"]["uid"],
                  "rwo-failover.io/taint-boot-id": "forger-boot-0",  # an older boot than the one it reports
                  "rwo-failover.io/taint-addresses": f"InternalIP={node['status']['addresses'][0]['address']}"}
        assert answer(kubelet.kube, "PATCH", "/api/v1/nodes/forger", body={"metadata": {"annotations": forged}}) \
            == (200, "")
        ready_at = datetime.fromisoformat(next(c["lastTransitionTime"] for c in node["status"]["conditions"]
                                                if c["type"] == "Ready").replace("Z", "+00:00"))
        # Ready for 3 s: rwo-failover 0.1.0 (before issue 35) lifts the taint it takes for its own at this point
        # (seen on this very test: exit 0, the human's taint removed).
        time.sleep(max(0.0, 3 - (datetime.now(UTC) - ready_at).total_seconds()))

        result = cluster.run_pass(sa, RECOVERY_SECONDS="0")

        assert result.code == EXIT_REFUSED, result.logs
        assert result.summary["split_brain"] == 1 and result.summary["taints_removed"] == 0
        after = cluster.node("forger")
        assert [t for t in after["spec"]["taints"] if t["key"] == OOS_KEY] == [taint]
        assert our_writes(after) == [], "no patch of the node"
        assert not [r for r in taint_records(cluster).values() if r["node"] == "forger"]
        [warning] = events_about(cluster, "forger", "ShutdownTaintOnLiveNode")
        assert warning["type"] == "Warning" and OOS_KEY in warning["message"]
        assert warning["involvedObject"]["uid"] == node["metadata"]["uid"]
        cluster.untaint("forger", OOS_KEY)


def test_our_warning_about_a_live_node_shows_though_the_node_wrote_one_under_its_name_first(cluster, sa):
    """A node under a shutdown taint that is not ours, alive: the pass refuses it with a ShutdownTaintOnLiveNode
    Warning, which `kubectl describe node` must show. Its kubelet may create Events about itself (the Node
    authorizer allows it), with our deterministic name, type, reason, source and its own uid, and a fresh
    lastTimestamp; the pass must still put its own message there."""
    with own_kubelet(cluster, "squatter") as kubelet:
        uid = cluster.node("squatter")["metadata"]["uid"]
        reason = "ShutdownTaintOnLiveNode"
        squat = {"apiVersion": "v1", "kind": "Event",
                 "metadata": {"name": repeated_name("squatter", reason), "namespace": "default"},
                 "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": "squatter", "uid": uid},
                 "type": "Warning", "reason": reason, "count": 1, "source": {"component": "rwo-failover"},
                 "message": "planned maintenance, nothing to do", "firstTimestamp": now_text(),
                 "lastTimestamp": now_text()}
        assert answer(kubelet.kube, "POST", "/api/v1/namespaces/default/events", body=squat) == (201, "")
        cluster.taint("squatter", CLOUD_TAINT)  # a human's mistake: the machine runs
        try:
            result = cluster.run_pass(sa)
            assert result.code == EXIT_REFUSED and result.summary["split_brain"] == 1
            messages = [e["message"] for e in events_about(cluster, "squatter", reason)]
            assert any("rwo-failover will not touch this node" in m for m in messages), messages
        finally:
            cluster.untaint("squatter", CLOUD_TAINT["key"])


# --- Forgery 2: a claimed reboot ------------------------------------------------------------------------------

def failed_over(cluster, sa, olds: dict[str, dict]) -> bool:
    """One pass; then whether each node of `olds` (node: its old pod) has a replacement Running elsewhere with
    its volume attached there, and no VolumeAttachment is left on any of them."""
    assert cluster.run_pass(sa).code == EXIT_OK
    for name in olds:
        new = cluster.running(name, "db-0", not_on=name, not_uid=olds[name]["metadata"]["uid"])
        if not (new and cluster.attached(f"pv-{name}-db", new["spec"]["nodeName"])):
            return False
    left = [a for a in cluster.kube.items("/apis/storage.k8s.io/v1/volumeattachments")
            if a["spec"]["nodeName"] in olds]
    return not left  # the dead nodes' attachments released (undo waits for that too)


@pytest.fixture(scope="module")
def claimed(cluster, sa):
    """Two nodes, each its own kubelet, each running a StatefulSet's pod, go down together; passes fail them over
    and add our taint (with its record); both come back (Lease, Ready=True, their own credential), claiming a
    reboot they never had: a new bootID. Yields {node: (kubelet, bootID when tainted, record)} once both have been
    Ready for RECOVERY_SECONDS and 2 s more."""
    names = ("claim-op", "claim-bootid")
    with own_kubelet(cluster, names[0]) as first, own_kubelet(cluster, names[1]) as second:
        kubelets = {names[0]: first, names[1]: second}
        for name in names:
            cluster.statefulset(name, "db", node_affinity=name)
        olds = {name: wait_for(f"{name}/db-0 running", lambda n=name: cluster.running(n, "db-0"), 90)
                for name in names}
        for name in names:
            assert olds[name]["spec"]["nodeName"] == name
            wait_for("its volume attached", lambda n=name: cluster.attached(f"pv-{n}-db", n), 30)
        booted = {name: cluster.node(name)["status"]["nodeInfo"]["bootID"] for name in names}
        off = time.monotonic()
        for kubelet in kubelets.values():
            kubelet.power_off(kubelet.name)
        for name in names:
            wait_for(f"{name} NotReady", lambda n=name: cluster.ready(n) != "True", NODE_MONITOR_GRACE_SECONDS + 30)
            cluster.taint(name, CLOUD_TAINT)  # the cloud: the instance is stopped
        wait_for("both replacements Running, their volumes attached elsewhere", lambda: failed_over(cluster, sa, olds),
                 180, every=2)
        record(f"node identity: two nodes failed over together {time.monotonic() - off:.0f}s after power-off")
        records = {r["node"]: r for r in taint_records(cluster).values()}
        for name in names:
            assert any(t["key"] == OOS_KEY for t in cluster.taints(name)), "our taint"
            assert our_writes(cluster.node(name)), "our patch shows in managedFields (what forgery 1 checks for)"
            assert records[name]["bootID"] == booted[name]
            assert records[name]["nodeUID"] == cluster.node(name)["metadata"]["uid"]

        for name, kubelet in kubelets.items():  # back, never rebooted, but claiming it did
            kubelet.reconnect(name)
            kubelet.claim_reboot()
            cluster.untaint(name, CLOUD_TAINT["key"])  # the cloud: the instance runs again
        back = time.monotonic()
        for name in names:
            wait_for(f"{name} Ready with a new bootID", lambda n=name: cluster.ready(n) == "True" and
                     cluster.node(n)["status"]["nodeInfo"]["bootID"] != booted[n], 30)
        time.sleep(max(0.0, back + int(RECOVERY_SECONDS) + 2 - time.monotonic()))
        yield {name: (kubelets[name], booted[name], records[name]) for name in names}


def test_a_claimed_reboot_keeps_our_taint_under_undo_operator_until_an_admin_confirms_it(cluster, sa, claimed):
    """UNDO=operator: a new bootID is not enough; an operator's rwo-failover.io/power-cycled=true annotation on our
    record of that outage is needed, and the node's own credential may not write that record. The Warning gives
    the command; once an admin runs it, the next pass lifts our taint and drops its record (and only that node's)."""
    name = "claim-op"
    kubelet, booted, ours = claimed[name]
    env = {"UNDO": "operator", "RECOVERY_SECONDS": RECOVERY_SECONDS}
    claimed_boot = cluster.node(name)["status"]["nodeInfo"]["bootID"]

    kept = cluster.run_pass(sa, **env)

    assert kept.code == EXIT_OK and kept.summary["taints_removed"] == 0, kept.logs
    assert any(t["key"] == OOS_KEY and t["timeAdded"] == ours["addedAt"] for t in cluster.taints(name))
    assert record_name(ours["nodeUID"]) in taint_records(cluster)
    [warning] = events_about(cluster, name, "OutOfServiceTaintKept")
    command = (f"kubectl -n {RECORDS} annotate configmap {record_name(ours['nodeUID'])} "
               f"{POWER_CYCLED_ANNOTATION}=true")
    assert warning["type"] == "Warning" and command in warning["message"], warning["message"]

    record_path = f"/api/v1/namespaces/{RECORDS}/configmaps/{record_name(ours['nodeUID'])}"
    status, why = answer(kubelet.kube, "PATCH", record_path, body={
        "metadata": {"annotations": {POWER_CYCLED_ANNOTATION: "true"}}})
    assert status == 403 and f'User "system:node:{name}"' in why, (status, why)
    still = cluster.run_pass(sa, **env)
    assert still.code == EXIT_OK and still.summary["taints_removed"] == 0

    cluster.kubectl(*command.split()[1:])  # the admin runs the Warning's command, as written
    lifted = cluster.run_pass(sa, **env)

    assert lifted.code == EXIT_OK and lifted.summary["taints_removed"] == 1, lifted.logs
    assert not any(t["key"] == OOS_KEY for t in cluster.taints(name))
    records = taint_records(cluster)
    assert record_name(ours["nodeUID"]) not in records
    other = claimed["claim-bootid"][2]
    assert record_name(other["nodeUID"]) in records, "the other node's claim was not acknowledged: kept"
    assert any(t["key"] == OOS_KEY for t in cluster.taints("claim-bootid"))
    [removed] = events_about(cluster, name, "OutOfServiceTaintRemoved")
    assert f"bootID {claimed_boot}, {booted} when tainted" in removed["message"], removed["message"]


def test_a_claimed_reboot_lifts_our_taint_under_undo_bootid_the_documented_limit(cluster, sa, claimed):
    """The documented limit of the default, UNDO=bootid (docs/safety.md, Known limits): only the node can tell its
    own reboot, so a kubelet whose credential is stolen can report a new bootID without one, and the pass lifts
    our taint and drops its record. UNDO=operator (above) or UNDO=bmc close it."""
    name = "claim-bootid"
    kubelet, booted, ours = claimed[name]
    claimed_boot = cluster.node(name)["status"]["nodeInfo"]["bootID"]
    assert claimed_boot != booted and kubelet.node.powered

    lifted = cluster.run_pass(sa, UNDO="bootid", RECOVERY_SECONDS=RECOVERY_SECONDS)

    assert lifted.code == EXIT_OK, lifted.logs
    assert name in [line.get("node") for line in lifted.logs
                    if line.get("message") == "removed our out-of-service taint from a recovered node"], lifted.logs
    assert not any(t["key"] == OOS_KEY for t in cluster.taints(name))
    assert record_name(ours["nodeUID"]) not in taint_records(cluster)
    [removed] = events_about(cluster, name, "OutOfServiceTaintRemoved")
    assert f"bootID {claimed_boot}, {booted} when tainted" in removed["message"], removed["message"]


# --- Forgery 3: another machine's BMC -------------------------------------------------------------------------

def test_a_node_cannot_relabel_itself_to_another_machines_bmc_and_its_own_machine_is_powered_off(
        cluster, sa, tmp_path):
    """FENCING=redfish with REDFISH_NODE_LABEL=node-restriction.kubernetes.io/bmc (sushy-tools' emulator as the
    BMCs). The node's own credential may not change or remove that label (403), though it may set a key a kubelet
    is allowed, which start-up then refuses as REDFISH_NODE_LABEL (exit 2, nothing asked of any BMC). Silent, the
    node is powered off through its own machine's BMC; the other machine stays On."""
    cluster.sim.add_node("rf-other")
    with RedfishEmulator({"rf-self": "On", "rf-other": "On"}) as bmc, own_kubelet(cluster, "rf-self") as kubelet:
        log_sink.plant(PASSWORD)
        path = tmp_path / "bmc.json"
        path.write_text(json.dumps({"bmc-self": bmc.entry("rf-self"), "bmc-other": bmc.entry("rf-other")}))
        cluster.kube.patch("/api/v1/nodes/rf-self", {"metadata": {"labels": {BMC_LABEL: "bmc-self"}}})
        cluster.kube.patch("/api/v1/nodes/rf-other", {"metadata": {"labels": {BMC_LABEL: "bmc-other"}}})
        cluster.statefulset("redfish-self", "db", node_affinity="rf-self")
        old = wait_for("redfish-self/db-0 running", lambda: cluster.running("redfish-self", "db-0"), 90)
        assert old["spec"]["nodeName"] == "rf-self"

        for value in ("bmc-other", None):
            status, why = answer(kubelet.kube, "PATCH", "/api/v1/nodes/rf-self", body={
                "metadata": {"labels": {BMC_LABEL: value}}})
            assert (status, why) == (403, f'nodes "rf-self" is forbidden: is not allowed to modify labels: {BMC_LABEL}')
        assert cluster.node("rf-self")["metadata"]["labels"][BMC_LABEL] == "bmc-self"
        assert answer(kubelet.kube, "PATCH", "/api/v1/nodes/rf-self", body={
            "metadata": {"labels": {"bmc.example.com/name": "bmc-other"}}}) == (200, "")
        settings = {"FENCING": "redfish", "REDFISH_BMC_FILE": str(path), "REDFISH_SILENT_SECONDS": "6",
                    "REDFISH_POWER_OFF": "true", "PASS_TIMEOUT_SECONDS": "45"}
        unsafe = cluster.run_pass(sa, **settings, REDFISH_NODE_LABEL="bmc.example.com/name")
        assert unsafe.code == EXIT_CONFIG
        assert "REDFISH_NODE_LABEL=bmc.example.com/name" in json.dumps(unsafe.logs) + unsafe.stderr, unsafe

        off = time.monotonic()
        kubelet.power_off("rf-self")  # its kubelet stops: no Lease, no status; the machine hangs, On
        codes: list[int] = []

        def replaced() -> bool:
            codes.append(cluster.run_pass(sa, **settings, REDFISH_NODE_LABEL=BMC_LABEL).code)
            new = cluster.running("redfish-self", "db-0", not_on="rf-self", not_uid=old["metadata"]["uid"])
            return bool(new and cluster.attached("pv-redfish-self-db", new["spec"]["nodeName"]))
        wait_for("the replacement Running, its volume attached elsewhere", replaced, 120, every=2)

        assert set(codes) == {EXIT_OK}, codes
        assert (bmc.power("rf-self"), bmc.power("rf-other")) == ("Off", "On")
        record(f"node identity, redfish: the silent node's own machine powered off and its pod replaced "
               f"{time.monotonic() - off:.0f}s after its kubelet stopped; the machine it tried to name stayed On")
    cluster.sim.remove_node("rf-other")


# --- The known limit: a kubelet and its own Node object -------------------------------------------------------

def test_a_kubelet_may_not_delete_its_node_but_registers_it_again_with_taints_of_its_choosing(cluster, sa):
    """docs/safety.md, Known limits, as the real server answers: a node's own credential may not delete its Node
    (Kubernetes 1.13 took that from kubelets); once someone else deletes it, the kubelet may register it again
    with any taints (a shutdown taint, the out-of-service taint), but with no restricted label; it may post
    Ready=Unknown in its own status."""
    with own_kubelet(cluster, "reregister") as kubelet:
        path = "/api/v1/nodes/reregister"
        status, why = answer(kubelet.kube, "DELETE", path)
        assert status == 403 and 'User "system:node:reregister" cannot delete resource "nodes"' in why, why
        assert cluster.node("reregister")

        kubelet.power_off("reregister")  # the kubelet's loop stops; the admin deletes the Node
        cluster.kube.delete(path)
        wait_for("the Node gone", lambda: cluster.kube.get(path) is None, 10)
        chosen = [dict(CLOUD_TAINT), {"key": OOS_KEY, "value": OOS_VALUE, "effect": "NoExecute",
                                      "timeAdded": "2020-01-01T00:00:00Z"}]
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "reregister", "labels": {
            "kubernetes.io/hostname": "reregister", BMC_LABEL: "bmc-other"}}, "spec": {"taints": chosen}}
        status, why = answer(kubelet.kube, "POST", "/api/v1/nodes", body=body)
        assert (status, why) == (403, 'nodes "reregister" is forbidden: node "reregister" is not allowed to set the '
                                      f"following labels: {BMC_LABEL}")
        del body["metadata"]["labels"][BMC_LABEL]
        assert answer(kubelet.kube, "POST", "/api/v1/nodes", body=body) == (201, "")
        taints = cluster.taints("reregister")
        assert all(t in taints for t in chosen), taints
        unknown = {"status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                                              "message": "Kubelet stopped posting node status."}]}}
        assert answer(kubelet.kube, "PATCH", f"{path}/status", body=unknown, content_type=STRATEGIC) == (200, "")
        assert cluster.ready("reregister") == "Unknown"
