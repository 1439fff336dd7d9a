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
from test_deploy import FORBIDDEN_TOLERATIONS  # the taints of a dead node, which no pod of ours may tolerate

from rwo_failover import __version__
from rwo_failover import settings as config
from rwo_testkit import chart

VALUES = yaml.safe_load((chart.CHART / "values.yaml").read_text())
# Settings whose chart default is this release's own: its namespace, its name (the CronJob's), its Lease.
FROM_THE_RELEASE = {"LEADER_ELECTION_NAMESPACE", "RECOVERY_NAMESPACE", "PUSHGATEWAY_INSTANCE",
                    "LEADER_ELECTION_LEASE_NAME"}
HELM_LABELS = ("helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by",
               "app.kubernetes.io/version")


LINTED = [None, {"mode": "ha"}, {"mode": "ha", "monitoring": {"prometheusRule": True, "serviceMonitor": True},
                                  "settings": {"FENCING": "networkfence", "NETWORK_FENCE_CLASS": "ceph"}}]


@pytest.mark.parametrize("values", LINTED)
def test_the_chart_lints_strictly(values):
    report = chart.lint(values)
    problems = [m for m in report["messages"] if m["severity"] >= 2]  # 2 warning, 3 error; 1 is info
    assert report["errors"] == [] and problems == [], report


def helper(name: str) -> str:
    """The body of a `define` in _helpers.tpl."""
    helpers = (chart.CHART / "templates" / "_helpers.tpl").read_text()
    return re.search(rf'define "rwo-failover.{name}" -}}}}\n(.*?)\n{{{{- end -}}}}', helpers, re.S)[1]


STRUCTURED = yaml.safe_load(helper("structured"))  # values.yaml path -> setting
STRUCTURED_SECRETS = yaml.safe_load(helper("structuredSecrets"))


def at(values: dict, path: str):
    for key in path.split("."):
        values = values[key]
    return values


def test_every_setting_has_the_programs_default_in_its_order():
    """Every setting is rendered, in the program's order, with the program's default: the chart's table of
    defaults is the code's, and the escape hatch `settings` is empty by default."""
    assert [line.split(":")[0] for line in helper("defaults").splitlines()] == [s.name for s in config.SPECS]
    assert yaml.safe_load(helper("defaults")) == {
        s.name: "" if s.name in FROM_THE_RELEASE else s.default for s in config.SPECS}
    assert helper("settingNames").split() == [s.name for s in config.SPECS]
    schema = json.loads((chart.CHART / "values.schema.json").read_text())
    assert list(schema["properties"]["settings"]["properties"]) == [s.name for s in config.SPECS]
    assert VALUES["settings"] == {}


def test_each_structured_value_is_in_values_yaml_and_the_schema_with_the_programs_default():
    """Issue 38: camelCase values with a schema. Each names one setting, once; its default in values.yaml is the
    program's (a list joined with commas, as the program reads it), or empty where the release decides."""
    schema = json.loads((chart.CHART / "values.schema.json").read_text())
    for named in (list(STRUCTURED.values()), list(STRUCTURED_SECRETS.values())):
        assert len(named) == len(set(named)) and set(named) <= set(config.BY_NAME)
    for path, name in STRUCTURED.items():
        value = at(VALUES, path)
        rendered = ",".join(value) if isinstance(value, list) else str(value).lower() if isinstance(value, bool) \
            else str(value)
        expected = "" if name in FROM_THE_RELEASE else config.BY_NAME[name].default
        assert rendered == expected, path
        node = schema
        for key in path.split("."):
            node = node["properties"][key]
        assert name in node["description"], path
    for path, name in STRUCTURED_SECRETS.items():
        assert at(VALUES, path) == {"secretName": "", "key": ""}, path
        assert name.endswith("_FILE") or name == "PUSHGATEWAY_URL"


def test_the_default_render_runs_every_setting_at_the_programs_default():
    env = env_of(chart.render({}, name="rwo-prod", namespace="ops"), "CronJob")
    release = {"LEADER_ELECTION_NAMESPACE": "ops", "RECOVERY_NAMESPACE": "ops", "PUSHGATEWAY_INSTANCE": "rwo-prod",
               "LEADER_ELECTION_LEASE_NAME": "rwo-prod-leader"}
    assert env == {s.name: release.get(s.name, s.default) for s in config.SPECS}


@pytest.mark.parametrize("values, env", [
    ({"dryRun": True}, {"DRY_RUN": "true"}),
    ({"shutdownTaints": ["example.com/off=true:NoExecute"]}, {"SHUTDOWN_TAINTS": "example.com/off=true:NoExecute"}),
    ({"brakes": {"maxUnhealthyFraction": 0.3, "maxNodesPerPass": 2, "stormCooldownSeconds": 600,
                 "maxPodsPerPass": 1000000}},
     {"MAX_UNHEALTHY_FRACTION": "0.3", "MAX_NODES_PER_PASS": "2", "STORM_COOLDOWN_SECONDS": "600",
      "MAX_PODS_PER_PASS": "1000000"}),
    ({"pods": {"includeNamespaces": ["db", "queue"], "excludeNamespaces": [], "selector": "tier in (a,b)",
               "stuckStates": ["Terminating"]}},
     {"INCLUDE_NAMESPACES": "db,queue", "EXCLUDE_NAMESPACES": "", "POD_SELECTOR": "tier in (a,b)",
      "STUCK_POD_STATES": "Terminating"}),
    ({"fencing": {"mode": "networkfence", "networkFence": {"className": "ceph"}, "minNotReadySeconds": "lease"}},
     {"FENCING": "networkfence", "NETWORK_FENCE_CLASS": "ceph", "FENCED_MIN_NOT_READY_SECONDS": "lease"}),
    ({"fencing": {"mode": "webhook", "webhook": {"url": "https://fencer.example:8443/fence"}}},
     {"FENCING": "webhook", "FENCE_WEBHOOK_URL": "https://fencer.example:8443/fence"}),
    ({"outOfServiceTaint": {"mode": "never", "recoverySeconds": 120}, "recovery": {"timeoutSeconds": 900}},
     {"OUT_OF_SERVICE_TAINT": "never", "RECOVERY_SECONDS": "120", "RECOVERY_TIMEOUT_SECONDS": "900"}),
    ({"metrics": {"pushgateway": {"url": "http://pushgateway.monitoring:9091", "instance": "prod"}},
      "terminationGracePeriodSeconds": 60, "passTimeoutSeconds": 40, "log": {"format": "json", "level": "DEBUG"}},
     {"PUSHGATEWAY_URL": "http://pushgateway.monitoring:9091", "PUSHGATEWAY_INSTANCE": "prod",
      "PASS_TIMEOUT_SECONDS": "40", "LOG_FORMAT": "json", "LOG_LEVEL": "DEBUG"}),
    ({"allowUnsafe": ["storm-cooldown"], "brakes": {"stormCooldownSeconds": 0}},
     {"ALLOW_UNSAFE": "storm-cooldown", "STORM_COOLDOWN_SECONDS": "0"}),
], ids=json.dumps)
def test_each_structured_value_becomes_its_setting_and_the_program_accepts_it(values, env):
    args, rendered = chart.workload(chart.render(values))
    assert {name: rendered[name] for name in env} == env
    config.load(args, rendered)


def test_the_escape_hatch_still_sets_what_has_a_structured_value_while_that_is_left_at_its_default():
    """Values written before the structured ones keep working: settings.FENCING with fencing.mode at none."""
    values = {"settings": {"FENCING": "networkfence", "NETWORK_FENCE_CLASS": "ceph", "INTERVAL": "0"}}
    env = env_of(chart.render(values), "CronJob")
    assert (env["FENCING"], env["NETWORK_FENCE_CLASS"]) == ("networkfence", "ceph")
    same = {"fencing": {"mode": "networkfence", "networkFence": {"className": "ceph"}}, **values}
    assert env_of(chart.render(same), "CronJob") == env, "given both ways, alike: accepted"


@pytest.mark.parametrize("values, named", [
    ({"fencing": {"mode": "webhook", "webhook": {"url": "https://f.example"}},
      "settings": {"FENCING": "networkfence"}}, ("FENCING", "fencing.mode=webhook", "settings.FENCING=networkfence")),
    ({"brakes": {"maxNodesPerPass": 2}, "settings": {"MAX_NODES_PER_PASS": 50}},
     ("MAX_NODES_PER_PASS", "brakes.maxNodesPerPass=2", "settings.MAX_NODES_PER_PASS=50")),
    ({"pods": {"excludeNamespaces": ["kube-system", "db"]}, "cronjob": {"settings": {"EXCLUDE_NAMESPACES": ""}}},
     ("EXCLUDE_NAMESPACES", "pods.excludeNamespaces=kube-system,db")),
    ({"dryRun": True, "settings": {"DRY_RUN": "false"}}, ("DRY_RUN", "dryRun=true")),
], ids=json.dumps)
def test_a_setting_given_both_ways_differently_is_refused_naming_both(values, named):
    message = refused(values)
    for part in named:
        assert part in message, part
    assert "set it once" in message


def test_a_bmc_secret_is_mounted_as_the_redfish_bmc_file():
    values = {"fencing": {"mode": "redfish", "redfish": {"bmcSecret": {"secretName": "bmcs", "key": "map.json"},
                                                         "powerOff": True}}}
    spec = pod_spec_of(chart.render(values))
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["FENCING"] == "redfish" and env["REDFISH_POWER_OFF"] == "true"
    assert env["REDFISH_BMC_FILE"] == "/etc/rwo-failover/secrets/redfish-bmc-file/map.json"
    [volume] = spec["volumes"]
    assert volume["secret"] == {"secretName": "bmcs", "items": [{"key": "map.json", "path": "map.json"}],
                                "defaultMode": 0o440}
    [mount] = spec["containers"][0]["volumeMounts"]
    assert mount["readOnly"] and mount["mountPath"] == "/etc/rwo-failover/secrets/redfish-bmc-file"
    assert spec["securityContext"]["fsGroup"] == 65532


def test_a_pushgateway_url_secret_is_read_from_the_secret():
    values = {"metrics": {"pushgateway": {"urlSecret": {"secretName": "push", "key": "url"}}}}
    [container] = pod_spec_of(chart.render(values))["containers"]
    [push] = [e for e in container["env"] if e["name"] == "PUSHGATEWAY_URL"]
    assert push == {"name": "PUSHGATEWAY_URL", "valueFrom": {"secretKeyRef": {"name": "push", "key": "url"}}}


@pytest.mark.parametrize("values, named", [
    ({"fencing": {"redfish": {"bmcSecret": {"secretName": "a", "key": "k"}}},
      "secretFiles": {"REDFISH_BMC_FILE": {"secretName": "b", "key": "k"}}}, "fencing.redfish.bmcSecret"),
    ({"fencing": {"webhook": {"tokenSecret": {"secretName": "a", "key": ""}}}}, "fencing.webhook.tokenSecret.key"),
    ({"metrics": {"pushgateway": {"urlSecret": {"secretName": "a", "key": "u"}}},
      "secretEnv": {"PUSHGATEWAY_URL": {"secretName": "b", "key": "u"}}}, "metrics.pushgateway.urlSecret"),
    ({"metrics": {"pushgateway": {"urlSecret": {"secretName": "a", "key": "u"}, "url": "http://p:9091"}}},
     "PUSHGATEWAY_URL"),
], ids=json.dumps)
def test_a_secret_named_twice_or_without_its_key_is_refused(values, named):
    assert named in refused(values)


@pytest.mark.parametrize("values, setting", [
    ({"fencing": {"mode": "networkfence"}}, "fencing.networkFence.className"),
    ({"mode": "ha", "fencing": {"mode": "webhook"}}, "fencing.webhook.url"),
    ({"fencing": {"mode": "redfish"}}, "fencing.redfish.bmcSecret"),
    ({"mode": "ha", "dryRun": True}, "dryRun"),
    ({"mode": "ha", "metrics": {"port": 0}}, "metrics.port"),
    ({"passTimeoutSeconds": 90}, "PASS_TIMEOUT_SECONDS=90"),
    ({"metrics": {"pushgateway": {"url": "http://u:p@pushgateway:9091"}}}, "PUSHGATEWAY_URL"),
    ({"shutdownTaints": ["example.com/off"], "tolerations": [{"key": "example.com/off", "operator": "Exists"}]},
     "tolerations[0]"),
], ids=json.dumps)
def test_every_refusal_holds_through_the_structured_values(values, setting):
    assert setting in refused(values)


@pytest.mark.parametrize("values, complaint", [
    ({"fencing": {"mdoe": "webhook"}}, "mdoe"),
    ({"fencing": {"mode": "stonith"}}, "mode"),
    ({"brakes": {"maxUnhealthyFraction": 1.5}}, "maxUnhealthyFraction"),
    ({"pods": {"stuckStates": ["Sleeping"]}}, "stuckStates"),
    ({"allowUnsafe": ["everything"]}, "allowUnsafe"),
], ids=json.dumps)
def test_the_schema_rejects_a_structured_value_that_does_not_exist(values, complaint):
    import helm_python as helm

    with pytest.raises(helm.HelmValuesError, match=complaint):
        chart.render(values)


# What an empty value means in the chart, for the settings whose default is this release's own.
EMPTY_IN_THE_CHART = {"LEADER_ELECTION_NAMESPACE": "the release's namespace",
                      "RECOVERY_NAMESPACE": "the release's namespace",
                      "PUSHGATEWAY_INSTANCE": "the release's name (the CronJob's), so each pass replaces one group",
                      "LEADER_ELECTION_LEASE_NAME": "this release's full name, with -leader"}


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


def container_of(values: dict, mode: str = "cronjob") -> dict:
    return pod_spec_of(chart.render({**values, "mode": mode}))["containers"][0]


def test_the_image_is_pinned_by_digest_or_the_app_version_when_a_tag_is_allowed():
    def image(values: dict) -> str:
        return container_of(values)["image"]
    assert image({"image": {"allowTagWithoutDigest": True}}) == f"registry.example.com/rwo-failover:{__version__}"
    digest = "sha256:" + "ab" * 32
    assert image({"image": {"repository": "r.example/p/rwo", "digest": digest}}) == f"r.example/p/rwo@{digest}"


@pytest.mark.parametrize("mode", ["cronjob", "ha"])
def test_an_image_pinned_by_digest_is_pulled_only_if_not_present(mode):
    """Issue 38: with Always, each minute's Job needs the registry, which may be down with the zone it serves;
    pinned by digest, the node's cached copy is the very image that was reviewed."""
    digest = "sha256:" + "cd" * 32
    container = container_of({"image": {"digest": digest}}, mode)
    assert container["image"].endswith("@" + digest) and container["imagePullPolicy"] == "IfNotPresent"


@pytest.mark.parametrize("mode", ["cronjob", "ha"])
def test_a_tag_without_a_digest_is_refused_and_the_message_says_why(mode):
    """The chart's own defaults name no digest: `helm install` without one fails, saying what to set."""
    import helm_python as helm

    with pytest.raises(helm.HelmError) as failed:
        chart.render_text({"mode": mode, "image": {"digest": ""}})
    message = str(failed.value)
    assert "rwo-failover: image.digest is empty" in message and "A tag can move" in message
    assert "image.allowTagWithoutDigest=true" in message and f"rwo-failover:{__version__}" in message
    with pytest.raises(helm.HelmError, match="image.digest is empty"):
        chart.render_text({"mode": mode, "image": {"tag": "0.1.0", "allowTagWithoutDigest": False}})


@pytest.mark.parametrize("mode", ["cronjob", "ha"])
def test_a_tag_allowed_without_a_digest_is_pulled_always(mode):
    """A tag can move: a node's cached copy may be another image than the tag names now."""
    container = container_of({"image": {"tag": "0.1.0-rc1", "allowTagWithoutDigest": True}}, mode)
    assert container["image"] == "registry.example.com/rwo-failover:0.1.0-rc1"
    assert container["imagePullPolicy"] == "Always"
    explicit = container_of({"image": {"allowTagWithoutDigest": True, "pullPolicy": "IfNotPresent"}}, mode)
    assert explicit["imagePullPolicy"] == "IfNotPresent"


def test_the_chart_s_own_defaults_name_no_digest_and_the_pull_policy_follows_it():
    """values.yaml can name no digest (each install brings its image's); the release workflow sets one."""
    assert VALUES["image"]["digest"] == "" and VALUES["image"]["allowTagWithoutDigest"] is False
    assert VALUES["image"]["pullPolicy"] == ""


@pytest.mark.parametrize("path", ["deploy/base/cronjob.yaml", "deploy/ha/deployment.yaml"])
def test_the_kustomize_manifests_pull_if_not_present(path):
    """They are pinned by digest in deploy/components/image (README Install), so IfNotPresent loses nothing."""
    docs = [d for d in yaml.safe_load_all((ROOT / path).read_text()) if d]
    [container] = pod_spec_of(docs)["containers"]
    assert container["imagePullPolicy"] == "IfNotPresent"


# --- the same objects as kustomize ------------------------------------------------------------------------

def kustomize(folder: Path) -> list[dict]:
    kubectl = real_tool("kubectl", "kubectl")  # a skip here; a failure where CI requires it (E2E_REQUIRED)
    rendered = subprocess.run([kubectl, "kustomize", str(folder)], capture_output=True, text=True, check=True,
                              timeout=120).stdout
    return [d for d in yaml.safe_load_all(rendered) if d]


def without_instance(node):
    """`node` without the label app.kubernetes.io/instance anywhere: the chart selects its pods by the release too
    (two releases in one namespace), and a kustomize install is one install."""
    if isinstance(node, dict):
        return {k: without_instance(v) for k, v in node.items() if k != "app.kubernetes.io/instance"}
    return [without_instance(v) for v in node] if isinstance(node, list) else node


def comparable(docs: list[dict]) -> dict[tuple[str, str, str], dict]:
    """Objects by (kind, namespace, name), without the labels only Helm adds (the release's, in selectors too)."""
    found = {}
    for doc in docs:
        doc = without_instance(copy.deepcopy(doc))
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
    # kustomize's image is the component's placeholder digest, the chart's here is chart.TEST_DIGEST: the same
    assert chart.TEST_DIGEST == "sha256:" + "0" * 64
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


# --- attack on the structured values (issue 38): what the schema lets through, every pod must accept -------

def _schema_at(path: str) -> dict:
    node = json.loads((chart.CHART / "values.schema.json").read_text())
    for key in path.split("."):
        node = node["properties"][key]
    return node


def _nested(path: str, value) -> dict:
    for key in reversed(path.split(".")):
        value = {key: value}
    return value


def _edge_values(path: str) -> list:
    """The values at each structured value's edges: its bounds, its enum, empty, and malformed names."""
    node, found = _schema_at(path), []
    found += node.get("enum", [])
    if node.get("type") in ("integer", "number"):
        found += [node[k] for k in ("minimum", "maximum") if k in node]
        if "exclusiveMinimum" in node:
            found.append(node["exclusiveMinimum"] + (1 if node["type"] == "integer" else 0.001))
    if node.get("type") == "array":
        found += [[], ["a b"], ["node.kubernetes.io/unreachable"], ["../x"]]
    if node.get("type") == "string":
        found += ["", "x y", "../x", "https://u:p@h.example/"]
    if "anyOf" in node:
        found += [0, 86400, "lease"]
    return found


@pytest.mark.parametrize("path", [p for p in STRUCTURED if p != "pods.selector"])  # a selector: the program's parser
@pytest.mark.parametrize("mode", ["cronjob", "ha"])
def test_every_structured_value_the_chart_renders_is_one_every_pod_accepts(path, mode):
    """Attack on the structured values: at each value's edges (its schema's bounds and enum, empty, a name with a
    space or a path in it), the chart either refuses (the schema, or a message naming the value) or renders an
    env the program starts with. Before, `shutdownTaints: []`, `brakes.maxUnhealthyFraction: 1`,
    `minNotReadySeconds: 0` and a namespace like `../x` rendered, and every pod then exited 2."""
    import helm_python as helm

    for value in _edge_values(path):
        try:
            args, env = chart.workload(chart.render({**_nested(path, value), "mode": mode}))
        except helm.HelmError as refused_here:
            assert isinstance(refused_here, helm.HelmValuesError) or "rwo-failover:" in str(refused_here)
            continue
        try:
            config.load(args, env)
        except config.ConfigError as err:
            pytest.fail(f"{path}={value!r} renders, and every pod refuses it: {err}")


@pytest.mark.parametrize("values, named", [
    ({"brakes": {"maxUnhealthyFraction": 0.95}}, "allowUnsafe"),
    ({"brakes": {"stormCooldownSeconds": 0}}, "storm-cooldown"),
    ({"minNotReadySeconds": 0}, "min-not-ready"),
    ({"passTimeoutSeconds": 5, "mode": "ha"}, "REQUEST_TIMEOUT_SECONDS"),  # a CronJob needs more (one_shot.py)
], ids=json.dumps)
def test_a_value_that_switches_a_safety_rule_off_needs_allow_unsafe_in_the_chart_too(values, named):
    message = refused(values)
    assert named in message
    args, env = chart.workload(chart.render({**values, "allowUnsafe": ["unhealthy-fraction", "storm-cooldown",
                                                                       "min-not-ready"]}
                                            if named != "REQUEST_TIMEOUT_SECONDS" else
                                            {**values, "settings": {"REQUEST_TIMEOUT_SECONDS": "5"}}))
    config.load(args, env)


# --- two releases in one namespace (issue 44) ---------------------------------------------------------------

def selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def selectors_and_targets(docs: list[dict]) -> list[tuple[str, dict, str]]:
    """Every label selector of a render, with what it finds: the pods, or (a ServiceMonitor's) the Service."""
    found = []
    for doc in docs:
        kind, spec = doc["kind"], doc.get("spec") or {}
        if kind in ("Deployment", "PodDisruptionBudget"):
            found.append((kind, spec["selector"]["matchLabels"], "pod"))
        if kind == "Service":
            found.append((kind, spec["selector"], "pod"))
        if kind == "NetworkPolicy":
            found.append((kind, spec["podSelector"]["matchLabels"], "pod"))
        if kind == "ServiceMonitor":
            found.append((kind, spec["selector"]["matchLabels"], "Service"))
        if kind == "Deployment":
            anti = spec["template"]["spec"]["affinity"]["podAntiAffinity"]
            terms = anti["requiredDuringSchedulingIgnoredDuringExecution"] + [
                t["podAffinityTerm"] for t in anti["preferredDuringSchedulingIgnoredDuringExecution"]]
            found += [("podAntiAffinity", t["labelSelector"]["matchLabels"], "pod") for t in terms]
    return found


def pod_labels(docs: list[dict]) -> dict:
    [workload] = [d for d in docs if d["kind"] in ("CronJob", "Deployment")]
    return workload["spec"].get("jobTemplate", workload)["spec"]["template"]["metadata"]["labels"]


def test_two_releases_in_one_namespace_never_select_each_others_pods():
    """Issue 44: the Deployment's, Service's, PodDisruptionBudget's and NetworkPolicy's selectors, the replicas'
    anti-affinity and the ServiceMonitor carried no app.kubernetes.io/instance: release b's budget counted a's
    pods, its Service sent scrapes to them, and the replicas of both avoided each other's nodes."""
    values = {"mode": "ha", "monitoring": {"serviceMonitor": True}}
    a, b = (chart.render(values, name=name, namespace="ops") for name in ("rwo-a", "rwo-b"))
    [service_a], [service_b] = ([d for d in docs if d["kind"] == "Service"] for docs in (a, b))
    targets = {"pod": (pod_labels(a), pod_labels(b)),
               "Service": (service_a["metadata"]["labels"], service_b["metadata"]["labels"])}
    found = selectors_and_targets(a)
    assert {kind for kind, _, _ in found} == {"Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy",
                                              "ServiceMonitor", "podAntiAffinity"}
    for kind, selector, target in found:
        ours, theirs = targets[target]
        assert selects(selector, ours) and not selects(selector, theirs), kind
    assert pod_labels(chart.render({}, name="rwo-a"))["app.kubernetes.io/instance"] == "rwo-a", "cronjob mode too"


def leader_lease(docs: list[dict]) -> tuple[str, list[str]]:
    """The Lease the pods elect on (their env), and the names the leader-election Role grants."""
    [role] = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"].endswith("-leader-election")]
    [named] = [r for r in role["rules"] if r.get("resourceNames")]
    return chart.workload(docs)[1]["LEADER_ELECTION_LEASE_NAME"], named["resourceNames"]


def test_each_release_elects_its_leader_on_its_own_lease():
    """Two releases shared the Lease rwo-failover-leader: one release's leader was every release's leader, and
    the other's replicas never passed. The Lease is now <fullname>-leader; a release named rwo-failover keeps
    the program's (and kustomize's) rwo-failover-leader."""
    leases = {name: leader_lease(chart.render({"mode": "ha"}, name=name, namespace="ops"))
              for name in ("rwo-failover", "rwo-a", "rwo-b")}
    assert leases == {"rwo-failover": ("rwo-failover-leader", ["rwo-failover-leader"]),
                      "rwo-a": ("rwo-a-leader", ["rwo-a-leader"]), "rwo-b": ("rwo-b-leader", ["rwo-b-leader"])}
    assert "get lease rwo-a-leader" in chart.notes({"mode": "ha"}, name="rwo-a", namespace="ops")
    named = {"mode": "ha", "settings": {"LEADER_ELECTION_LEASE_NAME": "ops-leader"}}
    assert leader_lease(chart.render(named, name="rwo-a")) == ("ops-leader", ["ops-leader"]), "a name given is kept"
    assert leader_lease(chart.render({"mode": "ha", "fullnameOverride": "db-failover"}, name="rwo-a"))[0] == \
        "db-failover-leader"


# --- the PodDisruptionBudget and the replicas' spread (issue 44) --------------------------------------------

@pytest.mark.parametrize("replicas", [1, 2, 3])
def test_a_disruption_budget_only_where_it_can_allow_an_eviction(replicas):
    """ha.replicas=1 rendered minAvailable: 1, which no eviction can ever satisfy: every drain of that node hung.
    Now one replica has no budget, and more have maxUnavailable: 1 (one at a time, whatever the count)."""
    budgets = [d["spec"] for d in chart.render({"mode": "ha", "ha": {"replicas": replicas}})
               if d["kind"] == "PodDisruptionBudget"]
    if replicas == 1:
        assert budgets == []
    else:
        [budget] = budgets
        assert budget["maxUnavailable"] == 1 and "minAvailable" not in budget


def test_the_replicas_prefer_a_zone_each_and_never_share_a_node():
    """One zone's outage, the very event this tool is for, could take both replicas when they spread by
    hostname only. A preference, not a rule: a cluster in one zone still schedules both."""
    docs = chart.render({"mode": "ha"})
    anti = pod_spec_of(docs)["affinity"]["podAntiAffinity"]
    own = pod_labels(docs)
    [required] = anti["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required["topologyKey"] == "kubernetes.io/hostname" and required["labelSelector"]["matchLabels"] == own
    [preferred] = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred["weight"] == 100 and preferred["podAffinityTerm"] == {
        "topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": own}}


# --- every render at the oldest Kubernetes the chart admits (issue 44) --------------------------------------

def minimum_kubernetes() -> str:
    chart_yaml = yaml.safe_load((chart.CHART / "Chart.yaml").read_text())
    return re.fullmatch(r">=(\d+\.\d+\.\d+)-0", chart_yaml["kubeVersion"])[1]


@pytest.mark.parametrize("source", ["chart", "deploy/base/cronjob.yaml"])
def test_every_pod_failure_rule_names_on_pod_conditions_as_kubernetes_1_28_requires(source):
    """kubeVersion admits 1.28, whose schema requires onPodConditions in every podFailurePolicy rule (1.29 made
    it optional): the CronJob failed validation there. Each exit-code rule now says `onPodConditions: []`."""
    docs = chart.render() if source == "chart" else [d for d in yaml.safe_load_all((ROOT / source).read_text()) if d]
    [cronjob] = [d for d in docs if d["kind"] == "CronJob"]
    rules = cronjob["spec"]["jobTemplate"]["spec"]["podFailurePolicy"]["rules"]
    assert all("onPodConditions" in rule for rule in rules) and minimum_kubernetes() == "1.28.0"
    assert [rule["onPodConditions"] for rule in rules if "onExitCodes" in rule] == [[], []]


def test_ci_validates_every_render_at_the_charts_minimum_kubernetes():
    """.ci/run validates every kustomize and chart render at the newest Kubernetes and at the chart's own
    minimum, read from Chart.yaml, so raising or lowering kubeVersion moves the check with it."""
    run = (ROOT / ".ci" / "run").read_text()
    assert "sed -n 's/^kubeVersion:" in run and "charts/rwo-failover/Chart.yaml)" in run
    assert re.search(r'kubernetes-validate" --strict --kubernetes-version "\$\{minimum:\?[^}]*\}" \\\n'
                     r'\s+\$manifests "\$rendered"/\*\.yaml', run)


BMC_MAP = {"n1": {"endpoint": "https://bmc.example/redfish/v1/Systems/1", "username": "u", "password": "p",
                  "uuid": "4c4c4544-0000-1000-8000-000000000001"}}
REDFISH = {"mode": "redfish", "redfish": {"bmcSecret": {"secretName": "bmcs", "key": "map.json"}}}
POWER_OFF = {"mode": "redfish", "redfish": {**REDFISH["redfish"], "powerOff": True}}
NETWORKFENCE = {"mode": "networkfence", "networkFence": {"className": "ceph"}}
OFF_WAIT_8 = {"mode": "redfish", "redfish": {**POWER_OFF["redfish"], "offWaitSeconds": 8}}
SHORT_REQUESTS = {"REQUEST_TIMEOUT_SECONDS": "3"}


@pytest.mark.parametrize("values", [
    {"minNotReadySeconds": 25}, {"minNotReadySeconds": 26}, {"minNotReadySeconds": 15, "passTimeoutSeconds": 30},
    {"minNotReadySeconds": 16, "passTimeoutSeconds": 30},
    {"minNotReadySeconds": 6, "passTimeoutSeconds": 9, "settings": SHORT_REQUESTS},
    {"minNotReadySeconds": 60, "fencing": {**NETWORKFENCE, "minNotReadySeconds": 25}},
    {"minNotReadySeconds": 60, "fencing": {**NETWORKFENCE, "minNotReadySeconds": 26}},
    {"passTimeoutSeconds": 11, "fencing": NETWORKFENCE, "settings": SHORT_REQUESTS},  # a wait of 0: nothing to fit
    {"passTimeoutSeconds": 44, "fencing": POWER_OFF}, {"passTimeoutSeconds": 43, "fencing": POWER_OFF},
    {"passTimeoutSeconds": 29, "fencing": POWER_OFF},
    {"passTimeoutSeconds": 38, "fencing": OFF_WAIT_8}, {"passTimeoutSeconds": 37, "fencing": OFF_WAIT_8},
    {"passTimeoutSeconds": 43, "fencing": REDFISH, "settings": {"REDFISH_POWER_OFF": "yes"}},  # the program's spelling
    {"passTimeoutSeconds": 43, "fencing": REDFISH},  # no power-off: no Lease watch, no Off wait
], ids=json.dumps)
def test_the_chart_refuses_a_not_ready_wait_exactly_when_a_one_shot_run_does(values, tmp_path):
    """The same arithmetic as settings/one_shot.py (a first pass of 6 s and 1 s of margins, the wait, the Lease watch
    and the BMC's Off wait before and after a ForceOff, within two thirds of passTimeoutSeconds and 2 s): the chart
    refuses a CronJob install exactly when its pods would. Both sides of each bound are here."""
    import helm_python as helm

    try:
        args, env = chart.workload(chart.render({**values, "mode": "cronjob"}))
    except helm.HelmError as err:
        assert "cannot pass within one Job" in str(err), err
        chart_refuses = True
        args, env = chart.workload(chart.render({**values, "mode": "ha"}))  # what the pods would have been given
    else:
        chart_refuses = False
    bmc_map = tmp_path / "map.json"
    bmc_map.write_text(json.dumps(BMC_MAP))
    env = {**env, "LEADER_ELECTION": "false", "INTERVAL": "0"}
    if env.get("REDFISH_BMC_FILE"):
        env["REDFISH_BMC_FILE"] = str(bmc_map)
    try:
        config.load(["--once"], env)
    except config.ConfigError as err:
        assert "cannot pass within one run" in str(err), err
        program_refuses = True
    else:
        program_refuses = False
    assert chart_refuses == program_refuses, (chart_refuses, program_refuses)
