"""The chart's pods: Secret-backed settings (mounted read-only, never rendered), and the values users of other
charts (descheduler's, kured's) expect: podAnnotations, podLabels, imagePullSecrets, priorityClassName, an
existing ServiceAccount, nodeSelector and affinity. Each is rendered with Helm's own SDK (rwo_testkit/chart.py);
where it matters, the rendered pod is then run as the kubelet would start it: its Secret files written where
they are mounted, its secretKeyRef env resolved, under the rendered RBAC (rwo_testkit/rbac_gate.py)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import plant, watched
from test_chart import pod_labels, pod_spec_of, refused

from rwo_failover import settings as config
from rwo_failover.run.cli import main
from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit import chart, rbac_gate
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fence_server import FenceServer

NS = "rwo-failover"
SECRETS_DIR = "/etc/rwo-failover/secrets"
FILE_SETTINGS = [s.name for s in config.SPECS if s.name.endswith("_FILE")]
WEBHOOK_SECRETS = {"FENCE_WEBHOOK_TOKEN_FILE": {"secretName": "fence-webhook", "key": "token"},
                   "FENCE_WEBHOOK_CA_FILE": {"secretName": "fence-webhook-ca", "key": "ca.crt"}}
PUSH_SECRET = {"PUSHGATEWAY_URL": {"secretName": "pushgateway", "key": "url"}}


def container_of(docs: list[dict]) -> dict:
    [container] = pod_spec_of(docs)["containers"]
    return container


def env_entries(docs: list[dict]) -> dict[str, dict]:
    return {e["name"]: e for e in container_of(docs)["env"]}


def as_the_kubelet_starts_it(docs: list[dict], secrets: dict[str, dict[str, str]], root: Path) -> tuple[list, dict]:
    """The rendered workload's args and env as its container sees them: each Secret volume's items written under
    `root` where they are mounted (and the env's paths pointing there), each secretKeyRef resolved from
    `secrets` ({secret name: {key: value}}). A missing Secret or key fails, as the pod would not start."""
    spec = pod_spec_of(docs)
    container = container_of(docs)
    volumes = {v["name"]: v for v in spec.get("volumes") or ()}
    moved = {}
    for mount in container.get("volumeMounts") or ():
        source = volumes[mount["name"]]["secret"]
        for item in source["items"]:
            path = root / mount["mountPath"].lstrip("/") / item["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(secrets[source["secretName"]][item["key"]])
        moved[mount["mountPath"]] = str(root / mount["mountPath"].lstrip("/"))
    env = {}
    for entry in container["env"]:
        if "valueFrom" in entry:
            ref = entry["valueFrom"]["secretKeyRef"]
            env[entry["name"]] = secrets[ref["name"]][ref["key"]]
            continue
        value = entry["value"]
        for mounted, there in moved.items():
            if value.startswith(mounted + "/"):
                value = there + value[len(mounted):]
        env[entry["name"]] = value
    return container.get("args") or [], env


# --- Secrets: mounted read-only, named by the setting, never rendered --------------------------------------

@pytest.mark.parametrize("mode", ["cronjob", "ha"])
@pytest.mark.parametrize("setting", FILE_SETTINGS)
def test_a_secret_file_is_mounted_read_only_and_its_setting_names_the_file(mode, setting):
    docs = chart.render({"mode": mode, "secretFiles": {setting: {"secretName": "rwo-creds", "key": "the.key"}}})
    spec, container = pod_spec_of(docs), container_of(docs)
    [volume] = spec["volumes"]
    [mount] = container["volumeMounts"]
    assert volume["secret"] == {"secretName": "rwo-creds", "items": [{"key": "the.key", "path": "the.key"}],
                                "defaultMode": 0o440}
    assert mount == {"name": volume["name"], "mountPath": f"{SECRETS_DIR}/{setting.lower().replace('_', '-')}",
                     "readOnly": True}
    assert env_entries(docs)[setting] == {"name": setting, "value": f"{mount['mountPath']}/the.key"}
    # Readable by the pod's group only (the kubelet gives a Secret volume's files the pod's fsGroup); the rest of
    # the hardening is what it was.
    plain = chart.render({"mode": mode})
    assert spec["securityContext"] == {**pod_spec_of(plain)["securityContext"], "fsGroup": 65532}
    assert container["securityContext"] == container_of(plain)["securityContext"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert not [d for d in docs if d["kind"] == "Secret"]


def test_without_secret_files_the_pod_has_no_volumes_and_no_fsgroup():
    spec = pod_spec_of(chart.render())
    assert "volumes" not in spec and "volumeMounts" not in spec["containers"][0]
    assert "fsGroup" not in spec["securityContext"]


def test_the_rendered_pod_fences_with_the_token_and_ca_of_its_secrets(api, kubeconfig, tmp_path):
    """FENCING=webhook installed with Helm: the token and CA come from Secrets, mounted where the settings say.
    The pass, started as the kubelet would start the rendered container, under the rendered RBAC, sends that
    token over TLS verified with that CA, and only then frees the pod."""
    token = plant("webhook-token-from-a-secret")
    with FenceServer() as fencer:
        values = {"settings": {"FENCING": "webhook", "FENCE_WEBHOOK_URL": fencer.url}, "secretFiles": WEBHOOK_SECRETS}
        docs = chart.render(values, namespace=NS)
        secrets = {"fence-webhook": {"token": token + "\n"},
                   "fence-webhook-ca": {"ca.crt": Path(fencer.ca_file).read_text()}}
        args, env = as_the_kubelet_starts_it(docs, secrets, tmp_path / "pod")
        fc.outage(api)
        rbac_gate.enforce(api, docs, NS, account="rwo-failover")
        out = io.StringIO()

        code = main(args, {**env, "KUBECONFIG": kubeconfig, "LOG_FORMAT": "json", "PASS_TIMEOUT_SECONDS": "20"},
                    stdout=out, stderr=io.StringIO(), sleep=lambda s: None, sightings=watched())

    assert code == EXIT_OK, out.getvalue()[-2000:]
    assert [r["headers"]["Authorization"] for r in fencer.requests] == [f"Bearer {token}"]
    assert api.get("pods", "db-0", "default") is None, "fenced, then freed"
    assert token not in chart.render_text(values, namespace=NS)


@pytest.mark.parametrize("mode", ["cronjob", "ha"])
def test_the_pushgateway_url_comes_from_a_secret_key_never_from_plain_env(mode):
    docs = chart.render({"mode": mode, "secretEnv": PUSH_SECRET})
    entries = env_entries(docs)
    assert list(entries) == [s.name for s in config.SPECS], "every setting, in the program's order"
    assert entries["PUSHGATEWAY_URL"] == {"name": "PUSHGATEWAY_URL", "valueFrom": {"secretKeyRef": {
        "name": "pushgateway", "key": "url"}}}
    password = plant("pushgateway-password-in-a-secret")
    args, env = as_the_kubelet_starts_it(docs, {"pushgateway": {"url": f"http://rwo:{password}@pushgateway:9091"}},
                                         Path("/nonexistent"))
    _args, settings = config.load(args, env)
    assert settings.pushgateway_url == f"http://rwo:{password}@pushgateway:9091"


def test_a_password_in_the_plain_pushgateway_url_is_refused_without_echoing_it():
    password = plant("plain-pushgateway-pa55")
    message = refused({"settings": {"PUSHGATEWAY_URL": f"http://rwo:{password}@pushgateway:9091"}})
    assert "PUSHGATEWAY_URL" in message and "secretEnv" in message and password not in message
    assert env_entries(chart.render({"settings": {"PUSHGATEWAY_URL": "http://pushgateway:9091"}}))[
        "PUSHGATEWAY_URL"]["value"] == "http://pushgateway:9091", "a URL without a password stays a value"


def test_a_pushgateway_from_a_secret_counts_for_the_grace_period():
    assert "terminationGracePeriodSeconds=50" in refused({"terminationGracePeriodSeconds": 50,
                                                          "secretEnv": PUSH_SECRET})


@pytest.mark.parametrize("values, named", [
    ({"settings": {"FENCE_WEBHOOK_TOKEN_FILE": "/token"}, "secretFiles": WEBHOOK_SECRETS}, "FENCE_WEBHOOK_TOKEN_FILE"),
    ({"mode": "ha", "ha": {"settings": {"FENCE_WEBHOOK_CA_FILE": "/ca"}}, "secretFiles": WEBHOOK_SECRETS},
     "FENCE_WEBHOOK_CA_FILE"),
    ({"settings": {"PUSHGATEWAY_URL": "http://pushgateway:9091"}, "secretEnv": PUSH_SECRET}, "PUSHGATEWAY_URL"),
    ({"secretFiles": {"FENCE_WEBHOOK_TOKN_FILE": {"secretName": "s", "key": "k"}}}, "FENCE_WEBHOOK_TOKN_FILE"),
    ({"secretFiles": {"FENCE_WEBHOOK_TOKEN_FILE": {"secretName": "s", "key": "..data"}}}, "FENCE_WEBHOOK_TOKEN_FILE"),
], ids=json.dumps)
def test_a_secret_backed_setting_that_is_also_set_or_is_no_setting_is_refused(values, named):
    assert named in refused(values)


@pytest.mark.parametrize("values, complaint", [
    ({"secretFiles": {"PUSHGATEWAY_URL": {"secretName": "s", "key": "k"}}}, "PUSHGATEWAY_URL"),  # not a file
    ({"secretFiles": {"KUBECONFIG": {"secretName": "s", "key": "k"}}}, "KUBECONFIG"),
    ({"secretEnv": {"FENCE_WEBHOOK_URL": {"secretName": "s", "key": "k"}}}, "FENCE_WEBHOOK_URL"),
    ({"secretEnv": {"PUSHGATEWAY_URL": "http://rwo:pw@pushgateway:9091"}}, "PUSHGATEWAY_URL"),  # a value, not a ref
    ({"secretFiles": {"FENCE_WEBHOOK_TOKEN_FILE": {"secretName": "s"}}}, "key"),
    ({"secretFiles": {"FENCE_WEBHOOK_TOKEN_FILE": {"secretName": "s", "key": "a/b"}}}, "key"),
    ({"secretFiles": {"FENCE_WEBHOOK_TOKEN_FILE": {"secretName": "S_1", "key": "k"}}}, "secretName"),
])
def test_the_schema_takes_secret_references_only(values, complaint):
    import helm_python as helm

    with pytest.raises(helm.HelmValuesError, match=complaint):
        chart.render(values)


@pytest.mark.parametrize("values", [
    lambda secret: {"secretEnv": {"PUSHGATEWAY_URL": f"http://rwo:{secret}@pushgateway:9091"}},
    lambda secret: {"secretFiles": {"FENCE_WEBHOOK_TOKEN_FILE": secret}},
    lambda secret: {"secretFiles": {"FENCE_WEBHOOK_TOKEN_FILE": {"secretName": "s", "key": "k", "value": secret}}},
])
def test_a_secret_put_where_a_reference_belongs_is_refused_without_echoing_it(values):
    import helm_python as helm

    secret = plant("s3cret-where-a-reference-belongs")
    with pytest.raises(helm.HelmValuesError) as failed:
        chart.render(values(secret))
    assert secret not in str(failed.value)


# --- what users of descheduler's and kured's charts expect --------------------------------------------------

EVERYTHING = {"podAnnotations": {"example.com/team": "storage"}, "podLabels": {"example.com/tier": "ops"},
              "imagePullSecrets": [{"name": "regcred"}], "priorityClassName": "ops-critical",
              "serviceAccount": {"create": False, "name": "ops-bot"},
              "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
              "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
                               "effect": "NoSchedule"}],
              "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                  {"matchExpressions": [{"key": "example.com/pool", "operator": "In", "values": ["ops"]}]}]}}},
              "secretFiles": WEBHOOK_SECRETS, "secretEnv": PUSH_SECRET}


@pytest.mark.parametrize("mode", ["cronjob", "ha"])
def test_the_chart_lints_strictly_with_every_pod_value_set(mode):
    report = chart.lint({**EVERYTHING, "mode": mode})
    assert report["errors"] == [] and [m for m in report["messages"] if m["severity"] >= 2] == [], report


@pytest.mark.parametrize("mode", ["cronjob", "ha"])
def test_pod_annotations_labels_pull_secrets_and_placement_render_as_given(mode):
    docs = chart.render({**EVERYTHING, "mode": mode})
    [workload] = [d for d in docs if d["kind"] in ("CronJob", "Deployment")]
    template = workload["spec"].get("jobTemplate", workload)["spec"]["template"]
    spec = template["spec"]
    assert template["metadata"]["annotations"] == {"example.com/team": "storage"}
    assert template["metadata"]["labels"]["example.com/tier"] == "ops"
    assert template["metadata"]["labels"]["app.kubernetes.io/name"] == "rwo-failover"
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    assert spec["affinity"]["nodeAffinity"] == EVERYTHING["affinity"]["nodeAffinity"], "replaces the preference"
    if mode == "ha":
        assert workload["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "rwo-failover",
                                                               "app.kubernetes.io/instance": "rwo-failover",
                                                               "app.kubernetes.io/component": "continuous"}


@pytest.mark.parametrize("mode", ["cronjob", "ha"])
@pytest.mark.parametrize("label", ["app.kubernetes.io/name", "app.kubernetes.io/instance",
                                   "app.kubernetes.io/component"])
def test_pod_labels_cannot_take_the_selectors_labels(mode, label):
    assert f"podLabels.{label}" in refused({"mode": mode, "podLabels": {label: "mine"}})


def test_the_replicas_never_share_a_node_whatever_affinity_says():
    """affinity.podAntiAffinity adds to the HA replicas' own rules (one per node, a zone each if it can), never
    replaces them."""
    theirs = {"topologyKey": "topology.kubernetes.io/zone",
              "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "rwo-failover"}}}
    preferred = [{"weight": 10, "podAffinityTerm": theirs}]
    spec = pod_spec_of(chart.render({"mode": "ha", "affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [theirs],
        "preferredDuringSchedulingIgnoredDuringExecution": preferred}}}))
    ours = pod_spec_of(chart.render({"mode": "ha"}))["affinity"]["podAntiAffinity"]
    anti = spec["affinity"]["podAntiAffinity"]
    assert anti["requiredDuringSchedulingIgnoredDuringExecution"] == \
        ours["requiredDuringSchedulingIgnoredDuringExecution"] + [theirs]
    assert anti["preferredDuringSchedulingIgnoredDuringExecution"] == \
        ours["preferredDuringSchedulingIgnoredDuringExecution"] + preferred
    assert spec["affinity"]["nodeAffinity"] == pod_spec_of(chart.render({"mode": "ha"}))["affinity"]["nodeAffinity"]


def test_affinity_in_cronjob_mode_renders_as_given():
    affinity = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": {
        "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "etcd"}}}}]},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": {
            "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "batch"}}}}]}}
    got = pod_spec_of(chart.render({"affinity": affinity}))["affinity"]
    assert got == {**affinity, "nodeAffinity": pod_spec_of(chart.render())["affinity"]["nodeAffinity"]}


@pytest.mark.parametrize("mode", ["cronjob", "ha"])
def test_an_existing_priority_class_is_used_and_none_is_created(mode):
    docs = chart.render({"mode": mode, "priorityClassName": "ops-critical"})
    assert pod_spec_of(docs)["priorityClassName"] == "ops-critical"
    assert not [d for d in docs if d["kind"] == "PriorityClass"]
    [ours] = [d for d in chart.render({"mode": mode}) if d["kind"] == "PriorityClass"]
    assert pod_spec_of(chart.render({"mode": mode}))["priorityClassName"] == ours["metadata"]["name"]


@pytest.mark.parametrize("values", [{}, {"mode": "ha"}, {"settings": {"FENCING": "networkfence",
                                                                        "NETWORK_FENCE_CLASS": "ceph"}}],
                         ids=json.dumps)
def test_an_existing_service_account_is_the_one_every_binding_names(values):
    docs = chart.render({**values, "serviceAccount": {"create": False, "name": "ops-bot"}}, namespace=NS)
    assert not [d for d in docs if d["kind"] == "ServiceAccount"]
    assert pod_spec_of(docs)["serviceAccountName"] == "ops-bot"
    bindings = [d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    assert len(bindings) == len([d for d in chart.render(values) if d["kind"] in ("RoleBinding",
                                                                                   "ClusterRoleBinding")])
    assert all(b["subjects"] == [{"kind": "ServiceAccount", "name": "ops-bot", "namespace": NS}] for b in bindings)


def test_a_pass_runs_as_the_existing_service_account_under_the_rendered_rbac(api, kubeconfig, tmp_path):
    docs = chart.render({"serviceAccount": {"create": False, "name": "ops-bot"}}, namespace=NS)
    args, env = as_the_kubelet_starts_it(docs, {}, tmp_path)
    fc.outage(api)
    rbac_gate.enforce(api, docs, NS, account="ops-bot")  # 403 for every call the bindings do not grant ops-bot
    out = io.StringIO()
    code = main(args, {**env, "KUBECONFIG": kubeconfig, "LOG_FORMAT": "json", "PASS_TIMEOUT_SECONDS": "20"}, stdout=out,
                stderr=io.StringIO(), sleep=lambda s: None, sightings=watched())
    assert code == EXIT_OK, out.getvalue()[-2000:]
    assert api.get("pods", "db-0", "default") is None


@pytest.mark.parametrize("create", [True, False])
def test_the_namespaces_default_service_account_is_refused(create):
    """Bound to `default`, rwo-failover's rights (delete pods, patch nodes) would go to every pod in the namespace
    that names no ServiceAccount."""
    assert "serviceAccount.name=default" in refused({"serviceAccount": {"create": create, "name": "default"}})


def test_a_created_service_account_may_be_named():
    docs = chart.render({"serviceAccount": {"create": True, "name": "rwo-sa"}}, namespace=NS)
    [account] = [d for d in docs if d["kind"] == "ServiceAccount"]
    assert account["metadata"]["name"] == pod_spec_of(docs)["serviceAccountName"] == "rwo-sa"


@pytest.mark.parametrize("values, complaint", [
    ({"serviceAccount": {"create": False, "nmae": "x"}}, "nmae"),
    ({"podLabels": {"a": 1}}, "podLabels"),
    ({"imagePullSecrets": ["regcred"]}, "imagePullSecrets"),
    ({"affinity": {"nodeAfinity": {}}}, "nodeAfinity"),
])
def test_the_schema_refuses_what_is_not_a_pod_value(values, complaint):
    import helm_python as helm

    with pytest.raises(helm.HelmValuesError, match=complaint):
        chart.render(values)


# --- beside other charts: a subchart, and the usual escape hatches (issue 44) -------------------------------

def test_the_chart_renders_as_a_subchart_with_a_parents_global_values(tmp_path):
    """The strict schema refused `global`, which Helm hands every subchart: the chart could not sit under an
    umbrella chart at all."""
    import helm_python as helm

    umbrella = tmp_path / "platform"
    shutil.copytree(chart.CHART, umbrella / "charts" / "rwo-failover")
    (umbrella / "Chart.yaml").write_text("apiVersion: v2\nname: platform\nversion: 1.0.0\n")
    values = {"global": {"imageRegistry": "registry.example.com", "storageClass": "fast"},
              "rwo-failover": {"image": {"digest": chart.TEST_DIGEST}, "nameOverride": "failover"}}
    with helm.Chart.load(str(umbrella)) as parent:
        parent.validate_schema(values)
        rendered = parent.render(values, name="platform", namespace="ops", is_install=True)
    docs = [d for path, body in rendered.items() if path.endswith(".yaml") for d in yaml.safe_load_all(body) if d]
    [cronjob] = [d for d in docs if d["kind"] == "CronJob"]
    assert cronjob["metadata"]["name"] == "platform-failover"
    assert pod_spec_of(chart.render({"global": {"imageRegistry": "registry.example.com"}}))


@pytest.mark.parametrize("release, values, name", [
    ("rwo-failover", {}, "rwo-failover"),
    ("platform", {"nameOverride": "failover"}, "platform-failover"),
    ("platform-failover", {"nameOverride": "failover"}, "platform-failover"),  # the release name holds it already
    ("platform", {"nameOverride": "failover", "fullnameOverride": "db-failover"}, "db-failover"),
], ids=json.dumps)
def test_name_override_names_every_object_and_never_the_pods_name_label(release, values, name):
    for mode, kind in (("cronjob", "CronJob"), ("ha", "Deployment")):
        docs = chart.render({**values, "mode": mode}, name=release)
        [workload] = [d for d in docs if d["kind"] == kind]
        assert workload["metadata"]["name"] == name == pod_spec_of(docs)["serviceAccountName"]
        assert pod_labels(docs)["app.kubernetes.io/name"] == "rwo-failover", "status finds the install by it"


def test_common_labels_are_on_every_object_and_the_pods():
    values = {"mode": "ha", "commonLabels": {"example.com/team": "storage", "cost-centre": "42"},
              "podLabels": {"cost-centre": "43"}, "namespace": {"create": True}, "statusViewer": {"create": True},
              "monitoring": {"prometheusRule": True, "serviceMonitor": True}}
    docs = chart.render(values)
    assert all(d["metadata"]["labels"]["example.com/team"] == "storage" for d in docs)
    assert {d["metadata"]["labels"]["cost-centre"] for d in docs} == {"42"}
    labels = pod_labels(docs)
    assert (labels["example.com/team"], labels["cost-centre"]) == ("storage", "43"), "podLabels over commonLabels"


@pytest.mark.parametrize("values, named", [
    ({"commonLabels": {"app.kubernetes.io/instance": "x"}}, "commonLabels.app.kubernetes.io/instance"),
    ({"commonLabels": {"helm.sh/chart": "x"}}, "commonLabels.helm.sh/chart"),
    ({"mode": "ha", "commonLabels": {"app.kubernetes.io/component": "x"}}, "commonLabels.app.kubernetes.io/component"),
    ({"namespace": {"create": True}, "commonLabels": {"pod-security.kubernetes.io/enforce": "privileged"}},
     "commonLabels.pod-security.kubernetes.io/enforce"),
    ({"monitoring": {"additionalLabels": {"app.kubernetes.io/name": "x"}}}, "monitoring.additionalLabels"),
    ({"commonLabels": {"release": "a"}, "monitoring": {"additionalLabels": {"release": "b"}}},
     "monitoring.additionalLabels.release"),
], ids=json.dumps)
def test_labels_the_chart_sets_itself_are_refused(values, named):
    assert named in refused(values)


@pytest.mark.parametrize("values, named", [
    # role aggregation: every holder of view (and so edit and admin) would get our writer's rights
    ({"commonLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
     "commonLabels.rbac.authorization.k8s.io/aggregate-to-view"),
    ({"commonLabels": {"app.kubernetes.io/part-of": "x"}}, "commonLabels.app.kubernetes.io/part-of"),
    # the Job controller's own labels: a Job whose pod template names another uid or name is refused
    ({"commonLabels": {"job-name": "x"}}, "commonLabels.job-name"),
    ({"commonLabels": {"batch.kubernetes.io/controller-uid": "x"}}, "commonLabels.batch.kubernetes.io/controller-uid"),
    ({"podLabels": {"controller-uid": "x"}}, "podLabels.controller-uid"),
    ({"podLabels": {"batch.kubernetes.io/job-name": "x"}}, "podLabels.batch.kubernetes.io/job-name"),
], ids=json.dumps)
def test_labels_that_grant_rights_or_belong_to_kubernetes_are_refused(values, named):
    assert named in refused(values)


def test_the_metrics_service_name_fits_a_dns_label_whatever_the_release_name():
    release = "r" * 53  # Helm's longest release name
    docs = chart.render({"mode": "ha", "nameOverride": "failover-for-the-dbs"}, name=release)
    [service] = [d for d in docs if d["kind"] == "Service"]
    assert len(service["metadata"]["name"]) <= 63 and service["metadata"]["name"].endswith("-metrics")


@pytest.mark.parametrize("mode", ["cronjob", "ha"])
def test_extra_env_volumes_mounts_and_spread_render_as_given_after_the_chart_s_own(mode):
    """A CA bundle from a ConfigMap, named by SSL_CERT_FILE; a proxy for the webhook; a spread of your own."""
    spread = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app.kubernetes.io/instance": "rwo-failover"}}}]
    extra_env = [{"name": "SSL_CERT_FILE", "value": "/etc/ca/ca.crt"},
                 {"name": "HTTPS_PROXY", "valueFrom": {"configMapKeyRef": {"name": "proxy", "key": "url"}}}]
    volume = {"name": "ca", "configMap": {"name": "ca-bundle"}}
    mount = {"name": "ca", "mountPath": "/etc/ca", "readOnly": True}
    values = {"mode": mode, "extraEnv": extra_env, "extraVolumes": [volume], "extraVolumeMounts": [mount],
              "topologySpreadConstraints": spread, "secretFiles": WEBHOOK_SECRETS}
    docs = chart.render(values)
    spec, container = pod_spec_of(docs), container_of(docs)
    assert [e["name"] for e in container["env"]] == [s.name for s in config.SPECS] + ["SSL_CERT_FILE", "HTTPS_PROXY"]
    assert container["env"][-2:] == extra_env
    assert spec["volumes"][-1] == volume and len(spec["volumes"]) == 3, "after secretFiles' two"
    assert container["volumeMounts"][-1] == mount and len(container["volumeMounts"]) == 3
    assert spec["topologySpreadConstraints"] == spread
    plain = chart.render({"mode": mode})
    assert "topologySpreadConstraints" not in pod_spec_of(plain) and "volumes" not in pod_spec_of(plain)


@pytest.mark.parametrize("name", [s.name for s in config.SPECS])
def test_extra_env_cannot_set_a_setting_so_every_refusal_holds(name):
    """extraEnv comes after the settings, and of two equal names in a container's env the later wins: without this
    refusal `extraEnv: [{name: MAX_UNHEALTHY_FRACTION, value: "0.95"}]` would switch the partition brake off past
    the chart's allowUnsafe check, and ALLOW_UNSAFE itself could be set there."""
    message = refused({"extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"},
                                    {"name": name, "value": "0.95"}]})
    assert f"extraEnv[1] sets {name}" in message


def test_an_extra_mount_cannot_cover_the_secret_files():
    for path in ("/etc/rwo-failover/secrets", "/etc/rwo-failover/secrets/", f"{SECRETS_DIR}/redfish-bmc-file",
                 "/etc/rwo-failover//secrets/x", "/etc/rwo-failover/./secrets/x", "/etc//rwo-failover/secrets",
                 "/etc/rwo-failover/ca/../secrets"):
        values = {"extraVolumes": [{"name": "x", "emptyDir": {}}],
                  "extraVolumeMounts": [{"name": "x", "mountPath": path}]}
        assert "extraVolumeMounts[0]" in refused(values)
    assert pod_spec_of(chart.render({"extraVolumes": [{"name": "x", "emptyDir": {}}],
                                     "extraVolumeMounts": [{"name": "x", "mountPath": "/etc/rwo-failover/ca"}]}))


@pytest.mark.parametrize("values, complaint", [
    ({"extraEnv": [{"value": "x"}]}, "name"),
    ({"extraEnv": [{"name": "A", "value": "x", "valueFrom": {}}]}, "extraEnv"),
    ({"extraEnv": [{"name": "A", "value": 1}]}, "value"),
    ({"extraVolumeMounts": [{"name": "x", "mountPath": "relative"}]}, "mountPath"),
    ({"topologySpreadConstraints": [{"topologyKey": "z", "whenUnsatisfiable": "ScheduleAnyway"}]}, "maxSkew"),
    ({"nameOverride": "Fail_Over"}, "nameOverride"),
    ({"commonLabels": {"team": 1}}, "commonLabels"),
    ({"monitoring": {"interval": "30"}}, "interval"),
    ({"monitoring": {"namespace": "Monitoring"}}, "namespace"),
], ids=json.dumps)
def test_the_schema_refuses_malformed_escape_hatches(values, complaint):
    import helm_python as helm

    with pytest.raises(helm.HelmValuesError, match=complaint):
        chart.render(values)


def test_monitoring_labels_namespace_and_interval_reach_the_rule_and_the_monitor():
    """kube-prometheus-stack's default ruleSelector and serviceMonitorSelector ask for `release: <its release>`;
    without that label it silently never loads the rules nor scrapes the replicas."""
    monitoring = {"prometheusRule": True, "serviceMonitor": True, "additionalLabels": {"release": "kps"},
                  "namespace": "monitoring", "interval": "1m"}
    docs = chart.render({"mode": "ha", "monitoring": monitoring}, name="rwo-a", namespace="ops")
    [rule] = [d for d in docs if d["kind"] == "PrometheusRule"]
    [monitor] = [d for d in docs if d["kind"] == "ServiceMonitor"]
    for found in (rule, monitor):
        assert found["metadata"]["labels"]["release"] == "kps" and found["metadata"]["namespace"] == "monitoring"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["ops"]}, "the Service stays in the release's"
    assert [e["interval"] for e in monitor["spec"]["endpoints"]] == ["1m"]
    [plain] = [d for d in chart.render({"mode": "ha", "monitoring": {"serviceMonitor": True}}, namespace="ops")
               if d["kind"] == "ServiceMonitor"]
    assert "namespaceSelector" not in plain["spec"] and plain["metadata"]["namespace"] == "ops"
    assert [e["interval"] for e in plain["spec"]["endpoints"]] == ["30s"]
