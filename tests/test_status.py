"""`rwo-failover status` (issue 38): one screen of what an install holds and why, from the cluster itself, and
strictly read-only: against the fixture API server it sends GETs alone, whatever it finds (the fixture logs
every request), with the real observe and planner of a dry-run pass."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from test_pause import control

from rwo_failover.run.cli import main
from rwo_failover.run.exitcodes import EXIT_CONFIG, EXIT_OK
from rwo_failover.run.status import STATUS_USER_AGENT
from rwo_testkit import fake_cluster as fc

NAMESPACE = "rwo-failover"


def status(api, kubeconfig: str, *argv: str, **env: str) -> tuple[int, str, list]:
    before = len(api.requests)
    out, err = io.StringIO(), io.StringIO()
    code = main(["status", *argv], {"KUBECONFIG": kubeconfig, **env}, stdout=out, stderr=err)
    assert code != EXIT_OK or not err.getvalue().strip(), err.getvalue()
    return code, out.getvalue(), api.requests[before:]


def assert_read_only(requests: list) -> None:
    assert requests, "it read the cluster"
    assert [(r.method, r.path) for r in requests if r.method != "GET"] == []
    assert {r.user_agent for r in requests} == {STATUS_USER_AGENT}, "audit logs tell status from a pass"


def test_after_a_real_pass_it_shows_each_section_and_sends_only_gets(api, kubeconfig, run_pass):
    """A node down, freed by a real pass (our taint on it, its pod's recovery pending), then paused by an
    operator and a storm remembered: every section says so, and status itself only reads."""
    fc.outage(api)
    assert run_pass().code == EXIT_OK
    control(api, {"paused": "true", "pausedBy": "alice (INC-7)", "reason": "storage maintenance",
                  "stormTrippedAt": "2026-01-02T03:00:00Z", "stormCalmSince": "2099-01-01T00:00:00Z"})
    code, text, requests = status(api, kubeconfig)
    assert code == EXIT_OK
    assert_read_only(requests)
    assert "PAUSED by alice (INC-7) since 2026-01-02T03:04:05Z (storage maintenance)" in text
    assert "STORM COOL-DOWN until 2099-01-01T00:05:00Z: a brake tripped at 2026-01-02T03:00:00Z" in text
    assert "NODE  VERDICT" in text and "\ndead  down" in text
    held = text.split("HELD BY US (1)\n", 1)[1].split("\n\n", 1)[0]
    assert "out-of-service taint  dead" in held and "held while the node is down" in held
    pending = text.split("RECOVERIES PENDING (1)\n", 1)[1].split("\n\n", 1)[0]
    assert "default/data-db-0" in pending and "default/db-0" in pending and "dead" in pending
    assert "LAST PASSES" in text and "no CronJob or Deployment" in text  # the fixture serves no batch/apps


def test_json_for_scripts_says_the_same(api, kubeconfig, run_pass):
    fc.outage(api)
    assert run_pass().code == EXIT_OK
    code, out, requests = status(api, kubeconfig, "-o", "json")
    assert code == EXIT_OK
    assert_read_only(requests)
    found = json.loads(out)
    assert found["pause"] == {"paused": False, "switch": False, "by": "", "since": "", "reason": "", "error": "",
                              "requests": []}
    assert found["storm"]["state"] == "none"
    assert [(n["node"], n["verdict"]) for n in found["nodes"]] == [("dead", "down")]
    assert [(h["kind"], h["node"]) for h in found["held"]] == [("out-of-service taint", "dead")]
    [pending] = found["recoveries"]
    assert pending["claim"] == "default/data-db-0" and pending["age_seconds"] >= 0
    assert "plan_table" not in found


def test_an_outage_it_would_act_on_is_shown_and_left_alone(api, kubeconfig):
    """Before any pass: status plans what a pass would do, and does none of it (no taint, no delete, no Event,
    no dry-run create either: the server-clock check trusts the Date header alone)."""
    fc.outage(api)
    code, text, requests = status(api, kubeconfig)
    assert code == EXIT_OK
    assert_read_only(requests)
    assert "WOULD RELEASE (1 pods, 1 VolumeAttachments)" in text and "default/db-0" in text
    assert api.get("pods", "db-0", "default") is not None and api.mutations() == []


def test_an_unreadable_pause_switch_is_shown_as_such(api, kubeconfig):
    control(api, {"paused": "perhaps"})
    code, text, requests = status(api, kubeconfig)
    assert code == EXIT_OK
    assert_read_only(requests)
    assert "PAUSED (fail safe): the control ConfigMap cannot be read" in text and "neither true nor false" in text


def test_a_cluster_string_cannot_forge_a_line(api, kubeconfig, run_pass):
    control(api, {"paused": "true", "pausedBy": "mallory\n\x1b[2JNot paused.", "reason": "x"})
    code, text, _ = status(api, kubeconfig)
    assert code == EXIT_OK and "\x1b" not in text
    assert "\nNot paused." not in text and "mallory\\n\\x1b[2JNot paused." in text


def test_usage_errors_and_the_kubectl_plugin_entry_point(api, kubeconfig):
    code, _, _ = status(api, kubeconfig, "-o", "yaml")
    assert code == EXIT_CONFIG
    plugin = subprocess.run([sys.executable, "-c", "import sys; from rwo_failover.run.status import plugin_main; "
                             "sys.exit(plugin_main())", "status", "-o", "json"], capture_output=True, text=True,
                            env={"KUBECONFIG": kubeconfig, "PATH": "/usr/bin:/bin"}, timeout=120)
    assert plugin.returncode == EXIT_OK, plugin.stderr
    assert json.loads(plugin.stdout)["namespace"] == NAMESPACE
    wrong = subprocess.run([sys.executable, "-c", "import sys; from rwo_failover.run.status import plugin_main; "
                            "sys.exit(plugin_main())", "pause"], capture_output=True, text=True, timeout=60)
    assert wrong.returncode == EXIT_CONFIG and "kubectl rwo-failover status" in wrong.stderr


def test_the_plugin_is_a_console_script_kubectl_finds():
    """kubectl runs `kubectl-rwo_failover` for `kubectl rwo-failover` (a dash in the name is an underscore in
    the file's); the krew manifest installs the same name."""
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-rwo_failover"] == "rwo_failover.run.status:plugin_main"
    krew = yaml.safe_load((ROOT / "deploy" / "krew" / "rwo-failover.yaml").read_text())
    assert krew["kind"] == "Plugin" and krew["metadata"]["name"] == "rwo-failover"
    assert all(p["bin"] == "kubectl-rwo_failover" for p in krew["spec"]["platforms"])


VIEWER = ROOT / "deploy" / "components" / "status-viewer" / "rbac.yaml"


@pytest.mark.parametrize("docs", [
    pytest.param(lambda: [d for d in yaml.safe_load_all(VIEWER.read_text()) if d], id="kustomize"),
    pytest.param(lambda: __import__("rwo_testkit.chart", fromlist=["render"]).render(
        {"statusViewer": {"create": True}, "settings": {"RECOVERY_NAMESPACE": "ops-records"}}), id="chart"),
])
def test_the_status_viewer_role_only_reads(docs):
    """A human's role for `kubectl rwo-failover status`: get, list and watch, nothing else."""
    roles = [d for d in docs() if d["kind"] in ("ClusterRole", "Role") and "status-viewer" in d["metadata"]["name"]]
    assert len(roles) >= 2 and not [d for d in docs() if "Binding" in d["kind"] and "status-viewer" in
                                    d["metadata"]["name"]], "roles only: the operator binds them"
    for role in roles:
        for rule in role["rules"]:
            assert set(rule["verbs"]) <= {"get", "list", "watch"}, (role["metadata"]["name"], rule)


# --- attack on status (issue 38): names read from the cluster or given by hand never leave their path -------

def test_a_namespace_that_is_no_namespace_name_is_refused_before_any_request(api, kubeconfig):
    """`-n ../../api/v1/namespaces/kube-system/secrets` went into every path unchecked when RECOVERY_NAMESPACE was
    set, so status (run by an admin) could be led to GET another resource and print it."""
    before = len(api.requests)
    out, err = io.StringIO(), io.StringIO()
    code = main(["status", "-n", "../../api/v1/namespaces/kube-system/secrets"],
                {"KUBECONFIG": kubeconfig, "RECOVERY_NAMESPACE": "rwo-failover"}, stdout=out, stderr=err)
    assert code == EXIT_CONFIG and "not a namespace name" in err.getvalue()
    assert api.requests[before:] == []


def test_a_leader_identity_cannot_lead_the_readyz_request_elsewhere(api, kubeconfig):
    """The leader Lease's holderIdentity names the pod whose /readyz status asks for through the pod proxy; an
    identity holding a path (../../secrets/...) must not become one: it is quoted whole, and refused if no pod
    name."""
    from rwo_failover import settings as config
    from rwo_failover.kube import Api, load_api_client
    from rwo_failover.run import status_install

    api.add({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "rwo-failover-leader", "namespace": NAMESPACE},
             "spec": {"holderIdentity": "../../../api/v1/namespaces/kube-system/secrets/x_a1b2c3d4",
                      "renewTime": "2026-01-02T03:04:05.000000Z"}})
    _, settings = config.load([], {"KUBECONFIG": kubeconfig})
    install = {"kind": "Deployment", "name": "rwo-failover", "env": {"METRICS_PORT": "8080"}, "note": "",
               "object": {"metadata": {"namespace": NAMESPACE, "name": "rwo-failover"}, "spec": {}}}
    before = len(api.requests)
    found = status_install.last_passes(Api(load_api_client(settings), settings), install, settings)
    paths = [r.path for r in api.requests[before:]]
    assert all(".." not in p and "secrets" not in p for p in paths), paths
    assert found["readyz"] == "" and "not a pod name" in found["note"] and found["leader"].endswith("_a1b2c3d4")


LAUNCHER = ROOT / "deploy" / "krew" / "kubectl-rwo_failover"
VENV_BIN = Path(sys.executable).parent
# What a human might type after `kubectl rwo-failover`: nothing at all, a pass's flags, a subcommand that does
# not exist. None of them may reach a pass, whichever executable kubectl finds first.
NOT_STATUS = ([], ["--once"], ["--once", "--dry-run=false"], ["--interval", "15"], ["run"], ["pause"],
              ["--dry-run=false", "status"], ["statuses"])


def plugin(executable: list[str], kubeconfig: str, *argv: str) -> subprocess.CompletedProcess:
    env = {"KUBECONFIG": kubeconfig, "PATH": f"{VENV_BIN}:/usr/bin:/bin", "DRY_RUN": "false"}
    return subprocess.run([*executable, *argv], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("executable", [["sh", str(LAUNCHER)], [str(VENV_BIN / "kubectl-rwo_failover")]],
                         ids=["krew-launcher", "console-script"])
def test_no_way_of_invoking_the_plugin_writes(api, kubeconfig, executable):
    """The krew archive's launcher and the wheel's console script are both `kubectl-rwo_failover`; whichever
    kubectl finds first, everything but `status`, `version` and `--help` exits 2 naming what the plugin does,
    before any request, and `status` sends GETs alone, on a cluster a real pass would act on."""
    fc.outage(api)
    for argv in NOT_STATUS:
        before = len(api.requests)
        done = plugin(executable, kubeconfig, *argv)
        assert done.returncode == EXIT_CONFIG, (argv, done.stdout, done.stderr)
        assert "read-only" in done.stderr and "kubectl rwo-failover status" in done.stderr, (argv, done.stderr)
        assert api.requests[before:] == [], argv
    assert api.mutations() == [] and api.get("pods", "db-0", "default") is not None
    version = plugin(executable, kubeconfig, "version")
    assert version.returncode == EXIT_OK and version.stdout.startswith("rwo-failover "), version.stderr
    helped = plugin(executable, kubeconfig, "--help")
    assert helped.returncode == EXIT_OK and "status" in helped.stdout and "read-only" in helped.stdout
    before = len(api.requests)
    shown = plugin(executable, kubeconfig, "status", "-n", NAMESPACE, "-o", "json")
    assert shown.returncode == EXIT_OK, shown.stderr
    assert json.loads(shown.stdout)["would_release"] == {"pods": 1, "attachments": 1}
    assert_read_only(api.requests[before:])
    assert api.mutations() == []


def test_the_krew_manifest_says_what_the_plugin_needs():
    """krew-index's criteria: a plugin that needs tools its archive does not carry says so in its caveats."""
    krew = yaml.safe_load((ROOT / "deploy" / "krew" / "rwo-failover.yaml").read_text())
    caveats = krew["spec"]["caveats"]
    assert "Python 3.11" in caveats and "pip install" in caveats and "rwo-failover" in caveats
    assert "read-only" in caveats


def install(api, *, release: str = "rwo-failover", env: dict[str, str] | None = None, **values) -> dict:
    """The chart's CronJob for `release`, rendered with `values` (then `env` over its container's env, as a
    hand-edited manifest), stored as an install in NAMESPACE."""
    from rwo_testkit import chart

    [cronjob] = [d for d in chart.render(values, name=release, namespace=NAMESPACE) if d["kind"] == "CronJob"]
    [container] = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    for variable in container["env"]:
        variable["value"] = (env or {}).get(variable["name"], variable.get("value"))
    return api.add(cronjob)


REDFISH = {"mode": "redfish", "redfish": {"bmcSecret": {"secretName": "bmc", "key": "map.json"},
                                          "nodeLabel": "node-restriction.kubernetes.io/bmc"}}


@pytest.mark.parametrize("spelling", ["redfish", "Redfish"])
def test_a_redfish_install_is_judged_with_its_own_settings(api, kubeconfig, spelling):
    """Status reads no Secret, so the install's BMC map cannot be read here: a stand-in map lets the install's
    settings load (its exclusions, its fencing) instead of this machine's defaults."""
    fc.outage(api)
    install(api, fencing=REDFISH, pods={"excludeNamespaces": ["default"]}, env={"FENCING": spelling})
    code, text, requests = status(api, kubeconfig, "-n", NAMESPACE, "-o", "json")
    assert code == EXIT_OK
    assert_read_only(requests)
    found = json.loads(text)
    assert found["settings"].startswith(f"the settings of CronJob {NAMESPACE}/rwo-failover"), found["settings"]
    assert found["would_release"]["pods"] == 0, "the install excludes the default namespace"


def test_two_installs_in_one_namespace_are_named_and_one_is_chosen_by_release(api, kubeconfig):
    fc.outage(api)
    install(api, release="team-a", pods={"includeNamespaces": ["team-a-apps"]})
    install(api, release="team-b", pods={"includeNamespaces": ["default"]})
    err = io.StringIO()
    code = main(["status", "-n", NAMESPACE], {"KUBECONFIG": kubeconfig}, stdout=io.StringIO(), stderr=err)
    assert code == EXIT_CONFIG
    assert "2 installs in rwo-failover (CronJob team-a, CronJob team-b): choose one with --release" in err.getvalue()
    code, text, _ = status(api, kubeconfig, "-n", NAMESPACE, "--release", "team-b", "-o", "json")
    assert code == EXIT_OK
    found = json.loads(text)
    assert found["settings"].startswith(f"the settings of CronJob {NAMESPACE}/team-b"), found["settings"]
    assert found["would_release"]["pods"] == 1


def test_every_pause_request_is_shown_with_its_requester(api, kubeconfig):
    control(api, {"pause.storage-team": "array firmware upgrade", "pause.db-team": "INC-42 restore"})
    code, text, requests = status(api, kubeconfig)
    assert code == EXIT_OK
    assert_read_only(requests)
    assert "PAUSED by db-team" in text and "(INC-42 restore)" in text and "until data.pause.db-team is removed" in text
    assert "PAUSED by storage-team" in text and "Not paused." not in text


def test_one_release_installed_as_both_a_cronjob_and_a_deployment_is_named_as_such(api, kubeconfig):
    """--release cannot choose between two workloads of one release (a CronJob left behind when it moved to HA
    mode): status says both run, and that one must go."""
    from rwo_testkit import chart

    install(api)
    [deployment] = [d for d in chart.render({"mode": "ha"}, namespace=NAMESPACE) if d["kind"] == "Deployment"]
    api.add(deployment)
    for argv in ([], ["--release", "rwo-failover"]):
        err = io.StringIO()
        code = main(["status", "-n", NAMESPACE, *argv], {"KUBECONFIG": kubeconfig}, stdout=io.StringIO(), stderr=err)
        assert code == EXIT_CONFIG
        assert "release rwo-failover runs as both" in err.getvalue() and "delete the one" in err.getvalue()
