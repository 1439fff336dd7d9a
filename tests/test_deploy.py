"""The deployables: cronjob.yaml matches the settings, and the Dockerfile's command really runs a pass."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from rwo_failover import config
from rwo_failover import fake_cluster as fc

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
        return manifest("deployment.yaml", "Deployment")["spec"]["template"]["spec"]
    return cronjob()["spec"]["jobTemplate"]["spec"]["template"]["spec"]


@pytest.mark.parametrize("which, overrides", [("cronjob", {}), ("deployment", {"INTERVAL": "15"})])
def test_every_env_var_is_a_setting_and_every_setting_is_there_with_its_default(which, overrides):
    [container] = pod_spec(which)["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert list(env) == [s.name for s in config.SPECS]
    assert env == {s.name: overrides.get(s.name, s.default) for s in config.SPECS}


def test_cronjob_schedule_and_job_limits():
    job = cronjob()["spec"]
    template = job["jobTemplate"]["spec"]
    assert job["schedule"] == "* * * * *" and job["concurrencyPolicy"] == "Forbid"
    assert job["startingDeadlineSeconds"] <= 60
    assert job["successfulJobsHistoryLimit"] >= 1 and job["failedJobsHistoryLimit"] >= 1
    assert template["activeDeadlineSeconds"] < 60, "shorter than the schedule"
    assert template["activeDeadlineSeconds"] > float(config.BY_NAME["PASS_TIMEOUT_SECONDS"].default)
    assert template["backoffLimit"] in (0, 1) and template["ttlSecondsAfterFinished"] > 0
    assert pod_spec()["restartPolicy"] == "Never"


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


def test_deployment_is_one_replica_that_finishes_its_pass_on_sigterm():
    deployment = manifest("deployment.yaml", "Deployment")["spec"]
    assert deployment["replicas"] == 1 and deployment["strategy"]["type"] == "Recreate"
    grace = deployment["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > float(config.BY_NAME["PASS_TIMEOUT_SECONDS"].default)


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


@pytest.mark.timeout(600)
def test_container_command_runs_a_real_pass(tmp_path: Path, api):
    image = dockerfile_runtime()
    assert image["workdir"] == "/app" and image["command"][1:] == ["reconcile.py", "--once"]
    # The image's file layout, from the Dockerfile's own COPY lines.
    workdir = tmp_path / "app"
    workdir.mkdir()
    for source in image["copy"]:
        src = ROOT / source.rstrip("/")
        copy = shutil.copytree if src.is_dir() else shutil.copy
        copy(src, workdir / src.name, **({"ignore": shutil.ignore_patterns("__pycache__")} if src.is_dir() else {}))
    # The image's dependencies: requirements.txt, hash-checked, into a fresh venv.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--require-hashes", "--no-deps",
                    "-r", str(ROOT / "requirements.txt")], check=True, timeout=540)
    for i in range(3):
        fc.live_node(api, f"w{i}")
    fc.dead_node(api, "dead")
    fc.add_volume(api, "data-db-0", attached_to="dead")
    api.add(fc.pod("db-0", "dead", claims=["data-db-0"], terminating=True))
    env = {k: v for k, v in image["env"].items() if k != "PYTHONPATH"}  # the venv stands in for /app/deps
    env.update(KUBECONFIG=api.write_kubeconfig(str(tmp_path / "kubeconfig")), PATH=os.environ.get("PATH", ""),
               HOME=str(tmp_path))

    # Exactly the image's command; only the interpreter path is the venv's.
    command = [str(venv / "bin" / "python")] + image["command"][1:]
    proc = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=120)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["message"] == "pass finished" and summary["pods_deleted"] == 1
    assert summary["attachments_deleted"] == 1
    assert api.objects("pods") == [] and api.objects("volumeattachments") == []
