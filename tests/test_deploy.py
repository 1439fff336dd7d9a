"""The deployables: cronjob.yaml matches the settings, and the Dockerfile's command really runs a pass."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import textwrap
import urllib.request
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, SESSION_LOG, fresh_venv
from helpers import detached, real_tool

from rwo_failover import settings as config
from rwo_testkit import fake_cluster as fc
from rwo_testkit.control_plane import free_port

FORBIDDEN_TOLERATIONS = ("node.kubernetes.io/out-of-service", "node.cloudprovider.kubernetes.io/shutdown",
                         "node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")


def manifest(name: str, kind: str) -> dict:
    docs = [d for d in yaml.safe_load_all((ROOT / name).read_text()) if d]
    [found] = [d for d in docs if d["kind"] == kind]
    return found


def cronjob() -> dict:
    return manifest("cronjob.yaml", "CronJob")


def pod_spec(which: str = "cronjob") -> dict:
    if which == "deployment":
        return manifest("deploy/ha/deployment.yaml", "Deployment")["spec"]["template"]["spec"]
    return cronjob()["spec"]["jobTemplate"]["spec"]["template"]["spec"]


@pytest.mark.parametrize("which, overrides", [("cronjob", {}),
                                              ("deployment", {"INTERVAL": "15", "LEADER_ELECTION": "true"})])
def test_every_env_var_is_a_setting_and_every_setting_is_there_with_its_default(which, overrides):
    [container] = pod_spec(which)["containers"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert list(env) == [s.name for s in config.SPECS]
    assert env == {s.name: overrides.get(s.name, s.default) for s in config.SPECS}


def test_cronjob_schedule_and_job_limits():
    job = cronjob()["spec"]
    template = job["jobTemplate"]["spec"]
    # Replace: a Job stuck on a dead node must never block the next pass (Forbid would, for good).
    assert job["schedule"] == "* * * * *" and job["concurrencyPolicy"] == "Replace"
    assert job["startingDeadlineSeconds"] <= 60
    assert job["successfulJobsHistoryLimit"] >= 1 and job["failedJobsHistoryLimit"] >= 1
    assert template["activeDeadlineSeconds"] < 60, "shorter than the schedule"
    assert template["activeDeadlineSeconds"] > float(config.BY_NAME["PASS_TIMEOUT_SECONDS"].default)
    assert template["backoffLimit"] in (0, 1) and template["ttlSecondsAfterFinished"] > 0
    assert pod_spec()["restartPolicy"] == "Never"


@pytest.mark.parametrize("which", ["cronjob", "deployment"])
def test_the_grace_period_covers_the_rest_of_a_pass_and_the_metrics_push(which):
    """After SIGTERM no new write starts, but the pass's reads and the push still finish before SIGKILL."""
    from rwo_failover.run.metrics import PUSH_TIMEOUT_SECONDS

    grace = pod_spec(which)["terminationGracePeriodSeconds"]
    assert grace >= float(config.BY_NAME["PASS_TIMEOUT_SECONDS"].default) + PUSH_TIMEOUT_SECONDS


@pytest.mark.parametrize("which", ["cronjob", "deployment"])
def test_hardening(which):
    spec = pod_spec(which)
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    [container] = spec["containers"]
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["requests"] and container["resources"]["limits"]
    assert spec["serviceAccountName"] == "rwo-failover"


@pytest.mark.parametrize("which", ["cronjob", "deployment"])
def test_never_tolerates_the_taints_of_a_dead_node(which):
    tolerations = pod_spec(which).get("tolerations") or ()
    assert not {t.get("key") for t in tolerations} & set(FORBIDDEN_TOLERATIONS)
    assert not any(t.get("operator") == "Exists" and not t.get("key") for t in tolerations)


def test_the_ha_deployment_is_two_leader_elected_replicas_on_different_nodes():
    deployment = manifest("deploy/ha/deployment.yaml", "Deployment")["spec"]
    assert deployment["replicas"] == 2
    assert deployment["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    grace = deployment["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > float(config.BY_NAME["PASS_TIMEOUT_SECONDS"].default), "the pass in flight finishes"
    anti = deployment["template"]["spec"]["affinity"]["podAntiAffinity"]
    [term] = anti["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == deployment["selector"]["matchLabels"]
    # a zone each where the cluster has zones: one zone's outage must not take both (issue 44)
    [zone] = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    assert zone["podAffinityTerm"] == {"topologyKey": "topology.kubernetes.io/zone",
                                       "labelSelector": term["labelSelector"]}
    pdb = manifest("deploy/ha/deployment.yaml", "PodDisruptionBudget")["spec"]
    assert pdb["maxUnavailable"] == 1 and pdb["selector"] == deployment["selector"]


def test_the_leader_lease_rbac_is_one_namespace_only():
    docs = [d for d in yaml.safe_load_all((ROOT / "deploy/ha/leader-election-rbac.yaml").read_text()) if d]
    assert {d["kind"] for d in docs} == {"Role", "RoleBinding"}
    assert {d["metadata"]["namespace"] for d in docs} == {config.BY_NAME["LEADER_ELECTION_NAMESPACE"].default}
    named = [r for d in docs if d["kind"] == "Role" for r in d["rules"] if r.get("resourceNames")]
    assert named and all(r["resourceNames"] == [config.BY_NAME["LEADER_ELECTION_LEASE_NAME"].default] for r in named)


@pytest.mark.parametrize("variant, kinds", [
    (".", {"Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding",
           "PriorityClass", "CronJob"}),
    ("deploy/ha", {"Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding",
                   "PriorityClass", "Deployment", "PodDisruptionBudget", "NetworkPolicy", "Service"}),
])
def test_every_kustomize_variant_renders_with_the_image_set_once(variant, kinds):
    kubectl = real_tool("kubectl", "kubectl")  # a skip here; a failure where CI requires it (E2E_REQUIRED)
    rendered = subprocess.run([kubectl, "kustomize", str(ROOT / variant)], capture_output=True, text=True,
                              check=True).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    assert {d["kind"] for d in docs} == kinds
    images = {c["image"] for d in docs if d["kind"] in ("CronJob", "Deployment")
              for c in (d["spec"].get("jobTemplate", d)["spec"]["template"]["spec"]["containers"])}
    assert images == {f"registry.example.com/rwo-failover@{PLACEHOLDER_DIGEST}"}


# The component's stand-in until an operator sets the digest of the image they pushed: it names no image, so an
# install that forgot it cannot pull (and never runs an unreviewed one).
PLACEHOLDER_DIGEST = "sha256:" + "0" * 64


def workload_containers(docs: list[dict]) -> list[tuple[dict, dict]]:
    """(workload, container) for each CronJob's and Deployment's containers."""
    return [(d, c) for d in docs if d["kind"] in ("CronJob", "Deployment")
            for c in d["spec"].get("jobTemplate", d)["spec"]["template"]["spec"]["containers"]]


@pytest.mark.parametrize("variant", [".", "deploy/ha"])
def test_the_renders_pin_the_image_by_digest_and_no_checkov_skip_claims_it(variant):
    """What the manifests say is so: each image is named by digest, which is what checkov's CKV_K8S_43 (image by
    digest) and CKV_K8S_15 (pull Always, unless by digest) look for, so neither is skipped; no remaining skip
    excuses itself with a digest, and the sources carry the digest too (for `kubectl apply -f`)."""
    kubectl = real_tool("kubectl", "kubectl")  # a skip here; a failure where CI requires it (E2E_REQUIRED)
    rendered = subprocess.run([kubectl, "kustomize", str(ROOT / variant)], capture_output=True, text=True,
                              check=True).stdout
    pairs = workload_containers([d for d in yaml.safe_load_all(rendered) if d])
    sources = [c for name in ("cronjob.yaml", "deploy/ha/deployment.yaml")
               for _, c in workload_containers([d for d in yaml.safe_load_all((ROOT / name).read_text()) if d])]
    assert pairs and sources
    for workload, container in pairs:
        assert re.fullmatch(r"[^@\s]+@sha256:[0-9a-f]{64}", container["image"]), container["image"]
        assert container["imagePullPolicy"] in ("IfNotPresent", "Always")
        skips = {k: v for k, v in (workload["metadata"].get("annotations") or {}).items()
                 if k.startswith("checkov.io/skip")}
        assert skips, "the remaining skips (CKV_K8S_38) are still there, each with its reason"
        for key, value in skips.items():
            check, _, reason = value.partition("=")
            assert check not in ("CKV_K8S_43", "CKV_K8S_15"), f"{key}: the check passes; no skip needed"
            assert reason and "digest" not in reason.lower(), f"{key}: {value}"
    for container in sources:
        assert container["image"].endswith(f"@{PLACEHOLDER_DIGEST}"), container["image"]


def dockerfile_runtime() -> dict:
    """WORKDIR, ENV, COPY sources and the ENTRYPOINT+CMD of the Dockerfile's last stage."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    stages = text.split("\nFROM ")
    found: dict = {"env": {}, "copy": [], "command": []}
    for line in stages[-1].splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "WORKDIR":
            found["workdir"] = rest.strip()
        elif word == "ENV":
            found["env"].update(dict(part.split("=", 1) for part in shlex.split(rest)))
        elif word == "COPY" and "--from" not in rest:
            found["copy"].extend(rest.split()[:-1])
        elif word in ("ENTRYPOINT", "CMD"):
            found["command"] += json.loads(rest)
    return found


def effective_command(which: str) -> tuple[list[str], dict[str, str]]:
    """What the kubelet runs for a manifest's container: the image's ENTRYPOINT, unless the container sets
    `command`, then the container's `args` (or the image's CMD); and the env: the image's, then the container's."""
    image = dockerfile_runtime()
    [container] = pod_spec(which)["containers"]
    command = container.get("command") or image["command"]
    args = container.get("args", [])
    env = {k: v for k, v in image["env"].items() if k != "PYTHONPATH"}
    env.update({e["name"]: e["value"] for e in container.get("env") or () if "value" in e})
    # The one downward-API field: the kubelet fills in the Job's name; here, a stand-in.
    env.update({e["name"]: "rwo-failover-29000000" for e in container.get("env") or () if "valueFrom" in e})
    return command + args, env


@pytest.fixture(scope="module")
def image_venv(tmp_path_factory) -> Path:
    """The image's dependencies: requirements.txt, hash-checked, into a fresh venv (the image's /app/deps),
    from the wheelhouse `make` keeps, so this runs offline."""
    return fresh_venv(tmp_path_factory.mktemp("image") / "venv", "--require-hashes", "--no-deps", "-r",
                      str(ROOT / "requirements.txt"))


def image_workdir(tmp_path: Path) -> Path:
    """The image's file layout, from the Dockerfile's own COPY lines."""
    workdir = tmp_path / "app"
    workdir.mkdir()
    for source in dockerfile_runtime()["copy"]:
        src = ROOT / source.rstrip("/")
        copy = shutil.copytree if src.is_dir() else shutil.copy
        copy(src, workdir / src.name, **({"ignore": shutil.ignore_patterns("__pycache__")} if src.is_dir() else {}))
    return workdir


def outage_cluster(api) -> None:
    for i in range(3):
        fc.live_node(api, f"w{i}")
    fc.dead_node(api, "dead")
    fc.add_volume(api, "data-db-0", attached_to="dead")
    api.add(fc.pod("db-0", "dead", claims=["data-db-0"], terminating=True))


def test_the_image_carries_no_test_doubles():
    image = dockerfile_runtime()
    assert not any("testkit" in source or source.startswith("tests") for source in image["copy"])
    allowed = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")]
    assert allowed and not any("testkit" in line or "tests" in line for line in allowed)


def test_each_manifest_states_its_own_mode():
    """The image has no mode; the CronJob asks for one pass, and the Deployment for continuous mode."""
    assert "--once" not in dockerfile_runtime()["command"]
    cron_argv, cron_env = effective_command("cronjob")
    args, settings = config.load(cron_argv[2:], cron_env)
    assert args.once, "the CronJob runs one pass per Job"
    deploy_argv, deploy_env = effective_command("deployment")
    args, settings = config.load(deploy_argv[2:], deploy_env)
    assert not args.once and settings.interval > 0, "the Deployment reaches the loop"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_container_command_runs_a_real_pass(tmp_path: Path, api, image_venv):
    """The CronJob's effective command, in the image's layout and dependencies, runs one pass and exits."""
    workdir = image_workdir(tmp_path)
    outage_cluster(api)
    argv, env = effective_command("cronjob")
    env.update(KUBECONFIG=api.write_kubeconfig(str(tmp_path / "kubeconfig")), PATH=os.environ.get("PATH", ""),
               HOME=str(tmp_path))
    # Exactly that command; only the interpreter path is the venv's.
    proc = subprocess.run([str(image_venv / "bin" / "python")] + argv[1:], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=120)

    SESSION_LOG.add(proc.stdout + proc.stderr)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summaries = [json.loads(line) for line in proc.stdout.splitlines() if '"pass finished"' in line]
    # A new process has not seen the node NotReady itself: it waits MIN_NOT_READY_SECONDS of its own sighting
    # (issue 35), passes again, and then exits.
    assert [s["not_yet"] for s in summaries] == [1, 0], "a pass, a wait, the pass that frees, then exit"
    assert summaries[-1]["pods_deleted"] == 1 and summaries[-1]["attachments_deleted"] == 1
    assert api.objects("pods") == [] and detached(api) == []


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_deployment_command_loops_until_sigterm(tmp_path: Path, api, image_venv):
    """The Deployment's effective command keeps passing until SIGTERM, then exits 0.

    INTERVAL is shortened so the test sees several passes; everything else is the manifest's.
    """
    workdir = image_workdir(tmp_path)
    outage_cluster(api)
    argv, env = effective_command("deployment")
    port = free_port()
    env.update(KUBECONFIG=api.write_kubeconfig(str(tmp_path / "kubeconfig")), PATH=os.environ.get("PATH", ""),
               HOME=str(tmp_path), INTERVAL="0.2", METRICS_PORT=str(port))
    proc = subprocess.Popen([str(image_venv / "bin" / "python")] + argv[1:], cwd=workdir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    passes = 0
    try:
        for line in proc.stdout:
            passes += '"pass finished"' in line
            if passes == 3:
                break
        assert proc.poll() is None, "still running after three passes"
        # What the Deployment's probes and the ServiceMonitor read.
        for path, expected in (("/healthz", b"ok"), ("/readyz", b"ok"), ("/metrics", b"rwo_failover_passes_total")):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
                assert answer.status == 200 and expected in answer.read()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        SESSION_LOG.add(out + err)
    finally:
        proc.kill()
    assert passes == 3, err
    assert proc.returncode == 0 and "stopped cleanly" in out, out + err


PINNED_IN = "deploy/components/image/kustomization.yaml"
HINT_FILES = ["README.md", "docs/operations.md", "deploy/base/cronjob.yaml", "deploy/ha/deployment.yaml",
              "deploy/base/kustomization.yaml", "deploy/ha/kustomization.yaml",
              "charts/rwo-failover/templates/cronjob.yaml", "charts/rwo-failover/templates/deployment.yaml"]


def test_every_image_pinning_hint_names_the_file_that_pins_it():
    """Each hint about where the image is set names the one kustomization with `images:`, which every variant
    includes; and README Install, which the checkov skips point at, pins by digest."""
    images = [p for p in ROOT.glob("**/kustomization.yaml") if ".ci-venvs" not in p.parts
              and "images" in (yaml.safe_load(p.read_text()) or {})]
    assert [p.relative_to(ROOT).as_posix() for p in images] == [PINNED_IN]
    for name in HINT_FILES:
        for line in (ROOT / name).read_text().splitlines():
            if re.search(r"(set|pin)\w* (the image|it)\b.*(once|digest)|images:.*variant|variant.*images:", line,
                         re.I):
                assert PINNED_IN in line or "README Install" in line, f"{name}: {line}"
    install = README_INSTALL()
    assert "digest" in install and PINNED_IN in install and "image.digest" in install


def README_INSTALL() -> str:
    return (ROOT / "README.md").read_text().split("## Install", 1)[1].split("\n## ", 1)[0]


def test_the_operations_guide_image_snippet_pins_the_rendered_image(tmp_path):
    """docs/operations.md step 2, pasted into the image component, pins both variants by digest."""
    kubectl = real_tool("kubectl", "kubectl")  # a skip here; a failure where CI requires it (E2E_REQUIRED)
    guide = (ROOT / "docs" / "operations.md").read_text()
    snippet = re.search(r"\*\*Set the image once\*\*.*?```yaml\n(.*?)```", guide, re.S)[1]
    digest = "sha256:" + "0" * 64
    snippet = textwrap.dedent(snippet).replace("sha256:<digest>", digest)
    shutil.copytree(ROOT / "deploy", tmp_path / "deploy")
    component = tmp_path / PINNED_IN
    text = component.read_text()
    component.write_text(text[:text.index("\nimages:") + 1] + snippet)
    for variant in ("deploy/base", "deploy/ha"):
        rendered = subprocess.run([kubectl, "kustomize", str(tmp_path / variant)], capture_output=True,
                                  text=True, check=True).stdout
        images = set(re.findall(r"image: (\S+)", rendered))
        assert images == {f"registry.example.com/platform/rwo-failover@{digest}"}, (variant, images)
