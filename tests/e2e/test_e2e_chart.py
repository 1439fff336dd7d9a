"""The Helm chart on a real control plane: rendered by Helm's own SDK, applied, and run as its ServiceAccount.

Each mode is its own release in its own namespace (created by the chart, with Pod Security `restricted`
admission). The CronJob controller creates a Job from the chart's CronJob; a pass and a leader election run
with the chart's ServiceAccount token, so the chart's RBAC is judged by the real API server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from rwo_failover.run.exitcodes import EXIT_REFUSED
from rwo_testkit.e2e import CLOUD_TAINT, PASS_ENV, REPO, wait_for

pytestmark = pytest.mark.e2e
chart = pytest.importorskip("rwo_testkit.chart")


def install(cluster, tmp_path, release: str, values: dict) -> None:
    """`helm template` then `kubectl apply`: the release's objects, as an operator without Tiller would."""
    manifest = tmp_path / f"{release}.yaml"
    manifest.write_text(chart.render_text({**values, "namespace": {"create": True}}, name=release,
                                          namespace=release))
    cluster.kubectl("apply", "-f", str(manifest))


def token_kubeconfig(cluster, release: str, account: str = ""):
    """A kubeconfig with a token of the release's ServiceAccount (named after it, or `account`)."""
    answer = cluster.kube.create(f"/api/v1/namespaces/{release}/serviceaccounts/{account or release}/token",
                                 {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                  "spec": {"expirationSeconds": 3600}})
    return cluster.cp.kubeconfig_for(answer["status"]["token"], account or release)


def pods_of(cluster, namespace: str, owner_kind: str) -> list[dict]:
    found = cluster.kube.items(f"/api/v1/namespaces/{namespace}/pods")
    return [p for p in found if any(r["kind"] == owner_kind for r in p["metadata"].get("ownerReferences") or ())]


@pytest.fixture(scope="module")
def nodes(cluster):
    for name in ("h1", "h2"):
        cluster.sim.add_node(name)
    return cluster


def test_the_cronjob_release_creates_jobs_and_its_serviceaccount_may_do_a_pass(nodes, tmp_path):
    cluster = nodes
    install(cluster, tmp_path, "rwo-cron", {"mode": "cronjob"})
    pod = wait_for("a Job's pod from the chart's CronJob, scheduled", lambda: next(
        (p for p in pods_of(cluster, "rwo-cron", "Job") if p["spec"].get("nodeName")), None), 90, every=2)
    assert pod["spec"]["serviceAccountName"] == "rwo-cron" and pod["spec"]["containers"][0]["args"] == ["--once"]

    # A node tainted for shutdown that still heartbeats: the pass reads nodes and the node's Lease, and
    # writes a Warning Event; every call is judged by the chart's RBAC. A denied verb would exit 5.
    cluster.sim.add_node("h-alive")
    wait_for("h-alive Ready", lambda: cluster.ready("h-alive") == "True", 30)
    cluster.taint("h-alive", CLOUD_TAINT)
    # With the settings the chart gave its pods (RECOVERY_NAMESPACE is the release's namespace), as a Job runs.
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"] if "value" in e}
    result = cluster.run_pass(token_kubeconfig(cluster, "rwo-cron"), RECOVERY_NAMESPACE=env["RECOVERY_NAMESPACE"])
    assert result.code == EXIT_REFUSED, (result.code, result.stderr, result.logs[-3:])
    assert result.summary["split_brain"] == 1 and result.summary["events"] == 1
    cluster.sim.remove_node("h-alive")


def test_the_ha_release_runs_two_replicas_and_its_serviceaccount_may_lead(nodes, tmp_path):
    cluster = nodes
    install(cluster, tmp_path, "rwo-ha", {"mode": "ha"})
    scheduled = wait_for("both Deployment pods scheduled", lambda: (lambda found: found if len(found) == 2 else None)(
        [p for p in pods_of(cluster, "rwo-ha", "ReplicaSet") if p["spec"].get("nodeName")]), 90, every=2)
    assert {p["spec"]["nodeName"] for p in scheduled} == {"h1", "h2"}, "one replica per node"

    # The Lease the chart named for this release (<fullname>-leader), which its RBAC grants by name.
    lease_name = next(e["value"] for e in scheduled[0]["spec"]["containers"][0]["env"]
                      if e["name"] == "LEADER_ELECTION_LEASE_NAME")
    assert lease_name == "rwo-ha-leader"
    env = {**os.environ, "KUBECONFIG": str(token_kubeconfig(cluster, "rwo-ha")), "HOME": str(cluster.cp.workdir),
           **PASS_ENV, "INTERVAL": "2", "LEADER_ELECTION": "true", "LEADER_ELECTION_NAMESPACE": "rwo-ha",
           "LEADER_ELECTION_LEASE_NAME": lease_name, "METRICS_PORT": "0"}
    log = tmp_path / "replica.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, str(REPO / "reconcile.py")], env=env, cwd=REPO, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        def leading() -> bool:
            lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
            return any(line["message"] == "leader election: now leading" for line in lines)
        wait_for("the chart's ServiceAccount leading", leading, 30)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert proc.returncode == 0, log.read_text()[-2000:]
    lease = cluster.kube.get(f"/apis/coordination.k8s.io/v1/namespaces/rwo-ha/leases/{lease_name}")
    assert lease is not None


def test_a_release_with_secrets_and_an_existing_serviceaccount_is_admitted_and_may_bump_its_warning(nodes, tmp_path):
    """Issue 28. The Job's pod gets its Secrets mounted read-only (mode 0440, fsGroup) and its Pushgateway URL from
    a secretKeyRef, and runs as an existing ServiceAccount; Pod Security `restricted` admits it. A pass with that
    account's token bumps a repeated Warning (get, then patch, in `default` only: the narrowed Events RBAC), and
    the real authorizer allows every call: a denied one would exit 5."""
    cluster, release = nodes, "rwo-sec"
    values = {"mode": "cronjob", "serviceAccount": {"create": False, "name": "ops-bot"},
              "secretFiles": {"FENCE_WEBHOOK_TOKEN_FILE": {"secretName": "fence", "key": "token"},
                              "FENCE_WEBHOOK_CA_FILE": {"secretName": "fence", "key": "ca.crt"}},
              "secretEnv": {"PUSHGATEWAY_URL": {"secretName": "push", "key": "url"}},
              "podAnnotations": {"example.com/team": "storage"}}
    install(cluster, tmp_path, release, values)
    assert "Secret" not in {d["kind"] for d in chart.render(values, name=release, namespace=release)}
    cluster.kube.create(f"/api/v1/namespaces/{release}/serviceaccounts",
                        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ops-bot"}})
    for name, data in (("fence", {"token": "t0ken", "ca.crt": "not checked here"}),
                       ("push", {"url": "http://rwo:pw@pushgateway.monitoring:9091"})):
        cluster.kube.create(f"/api/v1/namespaces/{release}/secrets",
                            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": data})
    pod = wait_for("a Job's pod of the release with Secrets, scheduled", lambda: next(
        (p for p in pods_of(cluster, release, "Job") if p["spec"].get("nodeName")), None), 120, every=2)
    spec, [container] = pod["spec"], pod["spec"]["containers"]
    assert spec["serviceAccountName"] == "ops-bot" and spec["securityContext"]["fsGroup"] == 65532
    assert pod["metadata"]["annotations"]["example.com/team"] == "storage"
    secrets = {v["name"]: v["secret"] for v in spec["volumes"] if "secret" in v}
    assert {s["secretName"] for s in secrets.values()} == {"fence"}
    assert all(s["defaultMode"] == 0o440 for s in secrets.values())
    mounts = [m for m in container["volumeMounts"] if m["name"] in secrets]
    assert len(mounts) == 2 and all(m["readOnly"] for m in mounts)
    env = {e["name"]: e for e in container["env"]}
    assert env["PUSHGATEWAY_URL"]["valueFrom"]["secretKeyRef"] == {"name": "push", "key": "url"}
    assert env["FENCE_WEBHOOK_TOKEN_FILE"]["value"] == "/etc/rwo-failover/secrets/fence-webhook-token-file/token"

    cluster.sim.add_node("h-sec")
    wait_for("h-sec Ready", lambda: cluster.ready("h-sec") == "True", 30)
    cluster.taint("h-sec", CLOUD_TAINT)
    kubeconfig = token_kubeconfig(cluster, release, "ops-bot")
    first = cluster.run_pass(kubeconfig, RECOVERY_NAMESPACE=release)
    assert first.code == EXIT_REFUSED and first.summary["split_brain"] == 1, (first.code, first.stderr)
    [warning] = [e for e in cluster.kube.items("/api/v1/namespaces/default/events")
                 if e["reason"] == "ShutdownTaintOnLiveNode" and e["involvedObject"]["name"] == "h-sec"]
    # As if written before the node re-registered: the next pass bumps it at once (get, then patch).
    cluster.kube.patch(f"/api/v1/namespaces/default/events/{warning['metadata']['name']}",
                       {"involvedObject": {"uid": "uid-of-the-node-before"}})
    second = cluster.run_pass(kubeconfig, RECOVERY_NAMESPACE=release)
    assert second.code == EXIT_REFUSED, (second.code, second.stderr, second.logs[-3:])
    bumped = cluster.kube.get(f"/api/v1/namespaces/default/events/{warning['metadata']['name']}")
    assert bumped["count"] == 2 and bumped["involvedObject"]["uid"] == cluster.node("h-sec")["metadata"]["uid"]
    cluster.sim.remove_node("h-sec")


def test_every_render_s_pod_failure_policy_is_accepted_and_kept_by_the_api_server(nodes, tmp_path):
    """Issue 36 item 6: the kustomize base, its HA variant and each of the chart's CI renders are applied with
    server-side apply (the API server validates and merges them, not kubectl), and each CronJob read back keeps
    its podFailurePolicy whole: a server without the feature would drop the field without a word. A Job the
    CronJob's controller creates from it carries the same policy."""
    import yaml

    from rwo_failover.run import exitcodes

    cluster = nodes
    renders = {"kustomize-cronjob": cluster.kubectl("kustomize", str(REPO)).stdout,
               "kustomize-ha": cluster.kubectl("kustomize", str(REPO / "deploy" / "ha")).stdout}
    for label, values in chart.MODES.items():
        release = f"ssa-{label}"[:40]
        renders[label] = chart.render_text({**values, "namespace": {"create": True}}, name=release,
                                           namespace=release)
    policies = {}
    for label, text in renders.items():
        path = tmp_path / f"{label}.yaml"
        path.write_text(text)
        applied = cluster.kubectl("apply", "--server-side", "--field-manager=e2e-ssa", "-f", str(path))
        assert "serverside-applied" in applied.stdout, applied.stdout
        for doc in (d for d in yaml.safe_load_all(text) if d and d["kind"] == "CronJob"):
            meta = doc["metadata"]
            live = cluster.kube.get(f"/apis/batch/v1/namespaces/{meta['namespace']}/cronjobs/{meta['name']}")
            kept = live["spec"]["jobTemplate"]["spec"]["podFailurePolicy"]
            # onPodConditions: [] beside each exit-code rule is for Kubernetes 1.28's schema, which requires the
            # field; later API servers store an empty list as absent
            rendered = {"rules": [{k: v for k, v in rule.items() if not (k == "onPodConditions" and v == [])}
                                  for rule in doc["spec"]["jobTemplate"]["spec"]["podFailurePolicy"]["rules"]]}
            assert kept == rendered, label
            policies[(meta["namespace"], meta["name"])] = kept
    assert len(policies) == 1 + len([m for m in chart.MODES.values() if m["mode"] == "cronjob"])
    for kept in policies.values():
        by_action = {rule["action"]: rule for rule in kept["rules"]}
        assert sorted(by_action["FailJob"]["onExitCodes"]["values"]) == sorted(exitcodes.FAIL_JOB)
        assert sorted(by_action["Count"]["onExitCodes"]["values"]) == sorted(exitcodes.COUNT)
        assert by_action["Ignore"]["onPodConditions"] == [{"type": "DisruptionTarget", "status": "True"}]

    namespace, name = next(iter(policies))
    job = wait_for("a Job from the server-side-applied CronJob", lambda: next(
        (j for j in cluster.kube.items(f"/apis/batch/v1/namespaces/{namespace}/jobs")
         if any(r["name"] == name for r in j["metadata"].get("ownerReferences") or ())), None), 90, every=2)
    assert job["spec"]["podFailurePolicy"] == policies[(namespace, name)]
