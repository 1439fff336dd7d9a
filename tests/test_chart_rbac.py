"""The chart's RBAC follows the settings its env carries: `settings`, with the mode's own `cronjob.settings` or
`ha.settings` over them. Each case renders the chart, runs what the rendered workload runs (its args, its env)
against the fixture API server, and lets the server enforce the rendered Roles and ClusterRoles
(rwo_testkit/rbac_gate.py): a grant that is missing is a 403, as on a cluster."""

from __future__ import annotations

import io
import json

import pytest
from conftest import watched

from rwo_failover import settings as config
from rwo_failover.kube import Api, load_api_client
from rwo_failover.kube.leader import LeaderElector
from rwo_failover.run.cli import main
from rwo_failover.run.exitcodes import EXIT_OK
from rwo_failover.run.runner import run_pass
from rwo_testkit import chart, rbac_gate
from rwo_testkit import fake_cluster as fc

NS = "rwo-failover"
FENCE = {"FENCING": "networkfence", "NETWORK_FENCE_CLASS": "ceph"}


def run_as_rendered(api, kubeconfig: str, values: dict) -> tuple[int, config.Settings, list[dict]]:
    """What the rendered pod runs, under the rendered RBAC: the exit code, its settings, the log lines."""
    docs = chart.render(values, namespace=NS)
    args, env = chart.workload(docs)
    env = {**env, "KUBECONFIG": kubeconfig, "LOG_FORMAT": "json", "PASS_TIMEOUT_SECONDS": "20"}
    fc.outage(api)
    rbac_gate.enforce(api, docs, NS, account="rwo-failover")
    out = io.StringIO()
    _args, settings = config.load(args, env)
    if settings.leader_election:  # HA: win the Lease as a replica does, then pass as the leader
        elector = LeaderElector(lambda: Api(load_api_client(settings), settings), settings.leader_election_namespace,
                                settings.leader_election_lease_name, identity="replica-0",
                                lease_seconds=settings.leader_election_lease_seconds)
        from rwo_failover.run import logs
        logs.setup("json", "INFO", out)
        assert elector.step() and elector.step(), "acquired, then renewed"
        code = run_pass(Api(load_api_client(settings), settings), settings, guard=elector.write_guard,
                        sightings=watched())
    else:
        code = main(args, env, stdout=out, stderr=io.StringIO(), sleep=lambda s: None, sightings=watched())
    return code, settings, [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]


CASES = [
    {},
    {"settings": {"RECOVERY_NAMESPACE": "ops-records"}},
    {"cronjob": {"settings": {"RECOVERY_NAMESPACE": "ops-records"}}},
    {"cronjob": {"settings": FENCE}},
    {"settings": FENCE, "cronjob": {"settings": {"FENCING": "none"}}},
    {"mode": "ha"},
    {"mode": "ha", "settings": {"LEADER_ELECTION_NAMESPACE": "ops-election"}},
    {"mode": "ha", "ha": {"settings": {"LEADER_ELECTION_NAMESPACE": "ops-election",
                                       "LEADER_ELECTION_LEASE_NAME": "rwo-b-leader"}}},
    {"mode": "ha", "ha": {"settings": {"RECOVERY_NAMESPACE": "ops-records", **FENCE}}},
]


@pytest.mark.parametrize("values", CASES, ids=lambda v: json.dumps(v, sort_keys=True))
def test_a_pass_with_the_rendered_env_runs_under_the_rendered_rbac(api, kubeconfig, values):
    code, settings, logs = run_as_rendered(api, kubeconfig, values)

    errors = [line for line in logs if line["level"] == "ERROR"]
    assert code == EXIT_OK, errors[:2]
    if settings.fencing == "networkfence":  # asked for fencing; nothing on the node until it answers
        assert api.get("networkfences", "dead") is not None and api.get("pods", "db-0", "default") is not None
    else:
        assert api.get("pods", "db-0", "default") is None, "force-deleted"
        records = [m for m in api.objects("configmaps") if m["metadata"]["name"].startswith("rwo-recovery-")]
        assert [m["metadata"]["namespace"] for m in records] == [settings.recovery_namespace]
    if settings.leader_election:
        lease = api.get("leases", settings.leader_election_lease_name, settings.leader_election_namespace)
        assert lease["spec"]["holderIdentity"] == "replica-0"


@pytest.mark.parametrize("values", CASES, ids=lambda v: json.dumps(v, sort_keys=True))
def test_the_rendered_rbac_grants_no_more_than_the_env_uses(values):
    """Each namespaced grant is in the namespace the env names, and the NetworkFence grant comes only with
    FENCING=networkfence: no Role left in a namespace the install does not use."""
    docs = chart.render(values, namespace=NS)
    _args, env = chart.workload(docs)
    roles = {d["metadata"]["name"].removeprefix("rwo-failover-"): d["metadata"].get("namespace")
             for d in docs if d["kind"] in ("Role", "ClusterRole") and d["metadata"]["name"] != "rwo-failover"}
    # Node Events live in `default` (a constant of the code, not a setting): only those are read and bumped.
    expected = {"recovery-records": env["RECOVERY_NAMESPACE"], "node-leases": "kube-node-lease",
                "node-events": "default"}
    if env["LEADER_ELECTION"] == "true":
        expected["leader-election"] = env["LEADER_ELECTION_NAMESPACE"]
    if env["FENCING"] == "networkfence":
        expected["networkfence"] = None
    assert roles == expected
    [cluster_role] = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "rwo-failover"]
    assert [r["verbs"] for r in cluster_role["rules"] if "events" in r["resources"]] == [["create"]], \
        "tenants' Events: create only"
    leader = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"].endswith("-leader-election")]
    for role in leader:
        names = [rule.get("resourceNames") for rule in role["rules"] if rule.get("resourceNames")]
        assert names == [[env["LEADER_ELECTION_LEASE_NAME"]]]


@pytest.mark.parametrize("values", [
    {"mode": "ha", "settings": {"LEADER_ELECTION_NAMESPACE": "ops-election"}},
    {"mode": "ha", "ha": {"settings": {"LEADER_ELECTION_NAMESPACE": "ops-election",
                                       "LEADER_ELECTION_LEASE_NAME": "rwo-b-leader"}}},
])
def test_the_notes_name_the_lease_the_replicas_use(values):
    _args, env = chart.workload(chart.render(values, namespace=NS))
    assert (f"kubectl -n {env['LEADER_ELECTION_NAMESPACE']} get lease {env['LEADER_ELECTION_LEASE_NAME']}"
            in chart.notes(values, namespace=NS))
