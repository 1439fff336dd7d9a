"""`pip install .` gives a working rwo-failover: the wheel declares what it imports and ships no test doubles."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT, fresh_venv

from rwo_failover import __version__
from rwo_testkit import fake_cluster as fc


def requirement_names(path: Path) -> set[str]:
    names = (re.split(r"[=<>~!\[ ;]", line.strip(), maxsplit=1)[0] for line in path.read_text().splitlines())
    return {name.lower().replace("_", "-") for name in names if name and not name.startswith(("#", "-"))}


def test_the_project_declares_every_direct_runtime_dependency():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert {re.split(r"[=<>~!\[ ;]", d, maxsplit=1)[0].lower() for d in declared} == \
        requirement_names(ROOT / "requirements.in")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built offline from a copy of the sources (the build writes build/ and egg-info beside them)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE", "rwo_failover", "rwo_testkit"):
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy
        copy(ROOT / name, src / name)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "-w", str(dist), str(src)], check=True, timeout=300)
    [built] = dist.glob("rwo_failover-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_ships_the_runtime_only(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("rwo_failover/planner/") for n in names)
    assert not [n for n in names if n.startswith(("rwo_testkit", "tests"))], "test doubles never ship"
    assert wheel.name.startswith(f"rwo_failover-{__version__}-")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_wheel_installs_in_a_fresh_venv_and_runs_a_pass(wheel, tmp_path, api, kubeconfig):
    """Installed with its declared dependencies resolved from the wheelhouse alone, as `pip install .` would."""
    venv = fresh_venv(tmp_path / "venv", str(wheel))
    command = str(venv / "bin" / "rwo-failover")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}

    shown = subprocess.run([command, "--help"], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "--max-nodes-per-pass" in shown.stdout
    version = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=60, env=env)
    assert version.stdout.strip() == f"rwo-failover {__version__}"

    fc.outage(api)
    passed = subprocess.run([command, "--once", "--dry-run"], capture_output=True, text=True, timeout=120,
                            env={**env, "KUBECONFIG": kubeconfig, "LOG_FORMAT": "json"}, cwd=tmp_path)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    # A new process proves the node down only once it has seen it NotReady for MIN_NOT_READY_SECONDS itself: the
    # first pass waits for that, the second plans the pod.
    *_, summary = [json.loads(line) for line in passed.stdout.splitlines() if '"pass finished"' in line]
    assert summary["dry_run"] is True and summary["pods_planned"] == 1
    assert len(api.objects("pods")) == 1, "a dry run changes nothing"
