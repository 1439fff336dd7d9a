"""The Helm chart (charts/rwo-failover), with Helm v4's own Go SDK: linted strictly, every setting a value,
and the same objects as the kustomize install for the same choices, so the two installs cannot drift."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from helpers import real_tool
from rwo_failover import __version__
from rwo_failover import settings as config
from rwo_testkit import chart
from test_deploy import FORBIDDEN_TOLERATIONS  # the taints of a dead node, which no pod of ours may tolerate

VALUES = yaml.safe_load((chart.CHART / "values.yaml").read_text())
# Settings whose chart default is this release's own: its namespace, its name (the CronJob's).
FROM_THE_RELEASE = {"LEADER_ELECTION_NAMESPACE", "RECOVERY_NAMESPACE", "PUSHGATEWAY_INSTANCE"}
HELM_LABELS = ("helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by",
               "app.kubernetes.io/version")


LINTED = [None, {"mode": "ha"}, {"mode": "ha", "monitoring": {"prometheusRule": True, "serviceMonitor": True},
                                  "settings": {"FENCING": "networkfence", "NETWORK_FENCE_CLASS": "ceph"}}]


@pytest.mark.parametrize("values", LINTED)
def test_the_chart_lints_strictly(values):
    report = chart.lint(values)
    problems = [m for m in report["messages"] if m["severity"] >= 2]  # 2 warning, 3 error; 1 is info
    assert report["errors"] == [] and problems == [], report


def test_every_setting_is_a_value_with_the_programs_default_in_its_order():
    assert list(VALUES["settings"]) == [s.name for s in config.SPECS]
    assert VALUES["settings"] == {s.name: "" if s.name in FROM_THE_RELEASE else s.default for s in config.SPECS}
    helpers = (chart.CHART / "templates" / "_helpers.tpl").read_text()
    [names] = re.findall(r'define "rwo-failover.settingNames" -}}\n(.+)\n', helpers)
    assert names.split() == [s.name for s in config.SPECS]
    schema = json.loads((chart.CHART / "values.schema.json").read_text())
    assert list(schema["properties"]["settings"]["properties"]) == [s.name for s in config.SPECS]


# What an empty value means in the chart, for the settings whose default is this release's own.
EMPTY_IN_THE_CHART = {"LEADER_ELECTION_NAMESPACE": "the release's namespace",
                      "RECOVERY_NAMESPACE": "the release's namespace",
                      "PUSHGATEWAY_INSTANCE": "the release's name (the CronJob's), so each pass replaces one group"}


def test_each_settings_schema_description_is_its_help_and_what_it_allows():
    """What `helm show values`' schema, and editors reading it, tell an operator is the program's own help."""
    schema = json.loads((chart.CHART / "values.schema.json").read_text())["properties"]["settings"]["properties"]
    for spec in config.SPECS:
        empty = f"; empty: {EMPTY_IN_THE_CHART[spec.name]}" if spec.name in EMPTY_IN_THE_CHART else ""
        assert schema[spec.name]["description"] == f"{spec.help} Allowed: {spec.allowed}{empty}.", spec.name


def env_of(docs: list[dict], kind: str) -> dict[str, str]:
    [workload] = [d for d in docs if d["kind"] == kind]
    spec = workload["spec"].get("jobTemplate", workload)["spec"]["template"]["spec"]
    return {e["name"]: e["value"] for e in spec["containers"][0]["env"]}


def test_the_rendered_env_is_every_setting_and_the_program_accepts_it():
    for mode, kind in (("cronjob", "CronJob"), ("ha", "Deployment")):
        env = env_of(chart.render({"mode": mode}, name="rwo-prod", namespace="ops"), kind)
        assert list(env) == [s.name for s in config.SPECS]
        assert env["LEADER_ELECTION_NAMESPACE"] == env["RECOVERY_NAMESPACE"] == "ops"
        assert env["PUSHGATEWAY_INSTANCE"] == "rwo-prod"
        args, settings = config.load(["--once"] if mode == "cronjob" else [], env)
        assert (settings.interval > 0 and settings.leader_election) == (mode == "ha")


def test_values_of_any_yaml_type_become_the_strings_the_program_reads():
    env = env_of(chart.render({"settings": {"DRY_RUN": True, "PAGE_SIZE": 1000000, "MAX_UNHEALTHY_FRACTION": 0.25}}),
                 "CronJob")
    assert (env["DRY_RUN"], env["PAGE_SIZE"], env["MAX_UNHEALTHY_FRACTION"]) == ("true", "1000000", "0.25")


@pytest.mark.parametrize("values, complaint", [
    ({"settings": {"DRY_RUNN": "true"}}, "DRY_RUNN"),
    ({"mode": "daemonset"}, "mode"),
    ({"image": {"repository": "r", "digest": "latest"}}, "digest"),
    ({"tolerations": [{"key": "node-role.kubernetes.io/control-plane", "opertor": "Exists"}]}, "opertor"),
])
def test_the_schema_rejects_a_value_that_is_not_a_setting(values, complaint):
    import helm_python as helm

    with pytest.raises(helm.HelmValuesError, match=complaint):
        chart.render(values)


def test_the_image_is_the_app_version_or_pinned_by_digest():
    def image(values: dict) -> str:
        [cron] = [d for d in chart.render(values) if d["kind"] == "CronJob"]
        return cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image({}) == f"registry.example.com/rwo-failover:{__version__}"
    digest = "sha256:" + "ab" * 32
    assert image({"image": {"repository": "r.example/p/rwo", "digest": digest}}) == f"r.example/p/rwo@{digest}"


# --- the same objects as kustomize ------------------------------------------------------------------------

def kustomize(folder: Path) -> list[dict]:
    kubectl = real_tool("kubectl", "kubectl")  # a skip here; a failure where CI requires it (E2E_REQUIRED)
    rendered = subprocess.run([kubectl, "kustomize", str(folder)], capture_output=True, text=True, check=True,
                              timeout=120).stdout
    return [d for d in yaml.safe_load_all(rendered) if d]


def comparable(docs: list[dict]) -> dict[tuple[str, str, str], dict]:
    """Objects by (kind, namespace, name), without the labels only Helm adds."""
    found = {}
    for doc in docs:
        doc = copy.deepcopy(doc)
        labels = doc["metadata"].get("labels") or {}
        for key in HELM_LABELS:
            labels.pop(key, None)
        meta = doc["metadata"]
        found[(doc["kind"], meta.get("namespace", ""), meta["name"])] = doc
    return found


def with_fencing_snippet(tmp_path: Path, variant: str) -> Path:
    """A copy of the kustomize tree with docs/fencing.md's snippet for `variant` added to its kustomization."""
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "deploy", tree / "deploy")
    shutil.copy(ROOT / "kustomization.yaml", tree / "kustomization.yaml")
    doc = (ROOT / "docs" / "fencing.md").read_text()
    snippet = re.search(rf"<!-- fencing-component: {re.escape(variant)} -->\n+```yaml\n(.*?)```", doc, re.S)[1]
    target = tree / variant / "kustomization.yaml"
    kustomization = yaml.safe_load(target.read_text())
    for key, items in yaml.safe_load(snippet).items():  # what "add to the list" means
        kustomization[key] = list(dict.fromkeys(kustomization.get(key, []) + items))
    target.write_text(yaml.safe_dump(kustomization))
    return tree / variant


@pytest.mark.parametrize("variant, values", [(".", {"mode": "cronjob"}), ("deploy/ha", {"mode": "ha"})])
def test_chart_and_kustomize_give_the_same_objects(variant, values):
    ours = comparable(chart.render({**values, "namespace": {"create": True}}))
    theirs = comparable(kustomize(ROOT / variant))
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
        assert ours[key] == theirs[key], key


@pytest.mark.parametrize("variant, mode", [(".", "cronjob"), ("deploy/ha", "ha")])
def test_the_fencing_component_is_the_same_and_the_docs_snippet_renders_in_each_variant(tmp_path, variant, mode):
    plain = comparable(kustomize(ROOT / variant))
    fenced = comparable(kustomize(with_fencing_snippet(tmp_path, variant)))
    added = {k: v for k, v in fenced.items() if k not in plain}
    assert {k[2] for k in added} == {"rwo-failover-networkfence"}, sorted(added)
    assert {k: v for k, v in fenced.items() if k in plain} == plain, "the snippet changes nothing else"
    values = {"mode": mode, "settings": {"FENCING": "networkfence", "NETWORK_FENCE_CLASS": "ceph"}}
    chart_added = {k: v for k, v in comparable(chart.render(values)).items()
                   if k not in comparable(chart.render({"mode": mode}))}
    assert chart_added == added


def test_the_monitoring_objects_are_the_ones_in_monitoring():
    docs = comparable(chart.render({"mode": "ha", "monitoring": {"prometheusRule": True, "serviceMonitor": True}}))
    for path in ("prometheusrule.yaml", "servicemonitor.yaml"):
        expected = yaml.safe_load((ROOT / "monitoring" / path).read_text())
        key = (expected["kind"], expected["metadata"]["namespace"], expected["metadata"]["name"])
        assert docs[key] == expected, path
    assert (chart.CHART / "files" / "rules.yml").read_text() == (ROOT / "monitoring" / "rules.yml").read_text()


def test_cronjob_mode_has_no_servicemonitor():
    kinds = {d["kind"] for d in chart.render({"monitoring": {"serviceMonitor": True}})}
    assert "ServiceMonitor" not in kinds and "CronJob" in kinds


# --- the chart renders only what the program and the API server accept -------------------------------------

@pytest.mark.parametrize("values, setting, env", [
    ({"mode": "ha", "settings": {"DRY_RUN": "true"}}, "DRY_RUN", {"DRY_RUN": "true"}),
    ({"mode": "ha", "ha": {"settings": {"DRY_RUN": True}}}, "DRY_RUN", {"DRY_RUN": "true"}),
    ({"mode": "ha", "ha": {"settings": {"INTERVAL": "0"}}}, "INTERVAL", {"INTERVAL": "0"}),
    ({"cronjob": {"settings": {"LEADER_ELECTION": "true"}}}, "LEADER_ELECTION", {"LEADER_ELECTION": "true"}),
    ({"settings": {"FENCING": "networkfence"}}, "NETWORK_FENCE_CLASS", {"FENCING": "networkfence"}),
    ({"mode": "ha", "ha": {"settings": {"FENCING": "webhook"}}}, "FENCE_WEBHOOK_URL", {"FENCING": "webhook"}),
    ({"mode": "ha", "settings": {"METRICS_PORT": "0"}}, "METRICS_PORT", None),  # containerPort 0: the API server's
])
def test_settings_every_pod_would_refuse_are_refused_when_rendering(values, setting, env):
    """Each of these would render, and then every pod would exit 2 (or the API server reject the Deployment):
    Helm refuses them first, naming the setting. `env` shows the program itself refuses the same settings."""
    import helm_python as helm

    with pytest.raises(helm.HelmError, match=setting) as refused:
        chart.render(values)
    assert "rwo-failover:" in str(refused.value)
    if env is not None:
        mode = values.get("mode", "cronjob")
        args, accepted = chart.workload(chart.render({"mode": mode}))
        with pytest.raises(config.ConfigError, match=setting):
            config.load(args, {**accepted, **env})


def test_every_env_these_tests_render_is_one_the_program_accepts():
    """What the chart renders, the program starts with: its own config.load, on the rendered args and env."""
    from test_chart_rbac import CASES

    renders = [None, *chart.MODES.values(), *LINTED, *CASES, {"mode": "cronjob", "settings": {
        "DRY_RUN": True, "PAGE_SIZE": 1000000, "MAX_UNHEALTHY_FRACTION": 0.25}},
        {"mode": "ha", "monitoring": {"prometheusRule": True, "serviceMonitor": True}},
        {"cronjob": {"settings": {"DRY_RUN": "true"}}}]
    for values in renders:
        for name, namespace in (("rwo-failover", "rwo-failover"), ("rwo-prod", "ops")):
            args, env = chart.workload(chart.render(values, name=name, namespace=namespace))
            config.load(args, env)  # raises ConfigError, naming the setting, on anything it would refuse


# --- combinations the chart's own rules forbid (issue 28) ---------------------------------------------------

CONTROL_PLANE = {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}


def pod_spec_of(docs: list[dict]) -> dict:
    [found] = [d for d in docs if d["kind"] in ("CronJob", "Deployment")]
    return found["spec"].get("jobTemplate", found)["spec"]["template"]["spec"]


def refused(values: dict) -> str:
    """The message `helm template` fails with, which must come from our own rules ("rwo-failover:")."""
    import helm_python as helm

    with pytest.raises(helm.HelmError) as failed:
        chart.render(values)
    assert "rwo-failover:" in str(failed.value), failed.value
    return str(failed.value)


@pytest.mark.parametrize("mode", ["cronjob", "ha"])
@pytest.mark.parametrize("toleration", [
    {"operator": "Exists"},
    {"operator": "Exists", "effect": "NoExecute"},
    {"operator": "Exists", "effect": "NoSchedule", "key": ""},
    *({"key": key, "operator": "Exists"} for key in FORBIDDEN_TOLERATIONS),
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
    {"key": "node.kubernetes.io/out-of-service", "operator": "Equal", "value": "nodeshutdown", "effect": "NoExecute"},
], ids=json.dumps)
def test_a_toleration_of_a_dead_nodes_taints_is_refused_naming_the_value(mode, toleration):
    """values.yaml says never to tolerate the shutdown, out-of-service, unreachable or not-ready taints: the pods
    would land on, or stay on, a dead node. A toleration with no key (operator Exists) tolerates all of them."""
    message = refused({"mode": mode, "tolerations": [CONTROL_PLANE, toleration]})
    assert "tolerations[1]" in message
    assert (toleration.get("key") or "every taint") in message


def test_a_toleration_of_a_configured_shutdown_taint_is_refused():
    """SHUTDOWN_TAINTS may name your own tooling's taint: that one marks dead nodes too."""
    values = {"settings": {"SHUTDOWN_TAINTS": "example.com/powered-off=true:NoSchedule,"
                                              "node.kubernetes.io/out-of-service"},
              "tolerations": [{"key": "example.com/powered-off", "operator": "Exists"}]}
    assert "tolerations[0]" in refused(values) and "example.com/powered-off" in refused(values)


@pytest.mark.parametrize("mode", ["cronjob", "ha"])
def test_a_toleration_of_another_taint_renders_as_given(mode):
    spec = pod_spec_of(chart.render({"mode": mode, "tolerations": [CONTROL_PLANE]}))
    assert spec["tolerations"] == [CONTROL_PLANE]


@pytest.mark.parametrize("values", [
    {"mode": "ha", "ha": {"settings": {"LEADER_ELECTION": "false"}}},
    {"mode": "ha", "ha": {"settings": {"LEADER_ELECTION": False}}},
    {"mode": "ha", "ha": {"settings": {"INTERVAL": "15", "LEADER_ELECTION": "0"}}},
], ids=json.dumps)
def test_ha_mode_without_leader_election_is_refused(values):
    """Two replicas that each pass and write, unelected; and NOTES would name a Lease that never exists."""
    assert "LEADER_ELECTION" in refused(values)


@pytest.mark.parametrize("values, named", [
    ({"terminationGracePeriodSeconds": 30}, "terminationGracePeriodSeconds=30"),
    ({"mode": "ha", "terminationGracePeriodSeconds": 44}, "terminationGracePeriodSeconds=44"),
    ({"settings": {"PASS_TIMEOUT_SECONDS": "90"}}, "terminationGracePeriodSeconds=60"),
    ({"mode": "ha", "ha": {"settings": {"PASS_TIMEOUT_SECONDS": 120}}}, "terminationGracePeriodSeconds=60"),
    # a one-shot pass pushes its metrics after the pass: 10 s more (run/metrics.py PUSH_TIMEOUT_SECONDS)
    ({"terminationGracePeriodSeconds": 50, "settings": {"PUSHGATEWAY_URL": "http://pushgateway:9091"}},
     "terminationGracePeriodSeconds=50"),
    ({"cronjob": {"activeDeadlineSeconds": 30}}, "activeDeadlineSeconds=30"),
    ({"cronjob": {"activeDeadlineSeconds": 45}}, "activeDeadlineSeconds=45"),  # no time left to start up
    ({"cronjob": {"activeDeadlineSeconds": 55}, "settings": {"PASS_TIMEOUT_SECONDS": "55.5"}},
     "activeDeadlineSeconds=55"),
], ids=json.dumps)
def test_a_deadline_shorter_than_the_pass_is_refused_naming_the_value(values, named):
    """SIGKILL or the Job's deadline would end a pass before its own deadline: no summary line, no metrics, and
    a write cut off where the pass would have stopped cleanly."""
    message = refused(values)
    assert named in message and "PASS_TIMEOUT_SECONDS" in message


@pytest.mark.parametrize("values", [
    {"mode": "ha", "terminationGracePeriodSeconds": 45},
    {"terminationGracePeriodSeconds": 55, "settings": {"PUSHGATEWAY_URL": "http://pushgateway:9091"}},
    {"cronjob": {"activeDeadlineSeconds": 46}},
    {"mode": "ha", "cronjob": {"activeDeadlineSeconds": 5}},  # no CronJob in ha mode: nothing to cut short
], ids=json.dumps)
def test_deadlines_that_cover_the_pass_render(values):
    assert pod_spec_of(chart.render(values))


def test_the_grace_period_covers_the_pass_and_the_push_the_program_makes():
    from rwo_failover.run.metrics import PUSH_TIMEOUT_SECONDS

    pass_timeout = int(config.BY_NAME["PASS_TIMEOUT_SECONDS"].default)
    push = {"PUSHGATEWAY_URL": "http://pushgateway:9091"}
    assert "terminationGracePeriodSeconds" in refused(
        {"terminationGracePeriodSeconds": pass_timeout + PUSH_TIMEOUT_SECONDS - 1, "settings": push})
    assert pod_spec_of(chart.render({"terminationGracePeriodSeconds": pass_timeout + PUSH_TIMEOUT_SECONDS,
                                     "settings": push}))
