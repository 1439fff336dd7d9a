"""The Makefile is the front door: every target's command runs, and set-up fails early and plainly.

Targets that need a cluster run against the fixture API server. The targets that run the test suite
itself (test, quick, e2e) run their exact commands with pytest told only to collect, so this test does not
run the suite inside the suite.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from helpers import detached

from rwo_testkit import fake_cluster as fc

MAKEFILE = (ROOT / "Makefile").read_text()
VENV = Path(sys.prefix)  # the venv running the tests: the one `make` set up
# Under `make test`, make's own variables reach the tests; a make started here must not think it is nested.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}


def phony_targets() -> list[str]:
    return [t for line in re.findall(r"^\.PHONY:(.*)$", MAKEFILE, re.M) for t in line.split()]


def make(*args: str, env: dict | None = None, cwd: Path = ROOT, timeout: float = 120) -> subprocess.CompletedProcess:
    """`make` in the repository, with this venv as VENV; its stamps are taken as up to date (-o), so no
    target sets anything up here."""
    full = {**CLEAN_ENV, **(env or {})}
    return subprocess.run(["make", "--no-print-directory", f"VENV={VENV}", "-o", f"{VENV}/.runtime",
                           "-o", f"{VENV}/.dev", *args], cwd=cwd, env=full, capture_output=True, text=True,
                          timeout=timeout)


def recipe(target: str) -> list[str]:
    """The commands `make TARGET` would run (make -n)."""
    proc = make("-n", target)
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if line.strip()]


@pytest.fixture
def outage(api, kubeconfig) -> dict:
    for i in range(3):
        fc.live_node(api, f"w{i}")
    fc.dead_node(api, "dead")
    fc.add_volume(api, "data-db-0", attached_to="dead")
    api.add(fc.pod("db-0", "dead", claims=["data-db-0"], terminating=True))
    return {"KUBECONFIG": kubeconfig, "LOG_FORMAT": "json"}


def summary(stdout: str) -> dict:
    """The run's last pass: a new process waits MIN_NOT_READY_SECONDS of its own sighting, then passes again."""
    found = [json.loads(line) for line in stdout.splitlines() if '"pass finished"' in line]
    assert [line["not_yet"] for line in found] == [1, 0], found
    return found[-1]


def run_collecting(target: str) -> None:
    """Run each command of TARGET; a pytest command only collects (it would otherwise run the suite)."""
    commands = recipe(target)
    assert commands
    for command in commands:
        argv = shlex.split(command)
        if argv[1:3] in (["-m", "pytest"], ["-m", "rwo_testkit.tiers"]):  # the tiers pass it on to pytest
            argv += ["--collect-only", "-q"]
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{command}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"


def test_every_phony_target_is_run_here():
    assert set(phony_targets()) == set(RUNNERS) | {"rebuild-venv"}


def run_demo(_api, _env) -> None:
    proc = make("demo", env={"LOG_FORMAT": "json"})
    assert proc.returncode == 0, proc.stderr
    assert "=== after:" in proc.stdout


def run_dry_run(api, env) -> None:
    proc = make("dry-run", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = summary(proc.stdout)
    assert found["dry_run"] is True and found["pods_planned"] == 1
    assert [p["metadata"]["name"] for p in api.objects("pods")] == ["db-0"], "a dry run changes nothing"


def run_run(api, env) -> None:
    proc = make("run", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary(proc.stdout)["pods_deleted"] == 1
    assert api.objects("pods") == [] and detached(api) == []


def run_lint_imports(_api, _env) -> None:
    proc = make("lint-imports", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "broken" in proc.stdout and "0 broken" in proc.stdout


def run_lint(_api, _env) -> None:
    """Each linter runs and finds nothing (tests/test_lint.py shows that each would find a defect)."""
    proc = make("lint", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "All checks passed!" in proc.stdout, "ruff"
    assert "Success: no issues found" in proc.stdout, "mypy"
    assert "0 broken" in proc.stdout, "lint-imports"


def run_clean(_api, _env, tmp_path: Path) -> None:
    """In a copy: the venv and caches go, the wheelhouse (the offline set-up) stays."""
    tmp_path = tmp_path / "clone"
    tmp_path.mkdir()
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    for folder in (".venv/bin", ".pytest_cache", ".hypothesis", ".wheelhouse"):
        (tmp_path / folder).mkdir(parents=True)
    proc = subprocess.run(["make", "clean"], cwd=tmp_path, capture_output=True, text=True, timeout=60, env=CLEAN_ENV)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [".wheelhouse", "Makefile"]


def run_mutants(_api, _env) -> None:
    """The real command, asked for its groups only (a real run takes minutes: docs/testing.md has its figures)."""
    proc = make("mutants", "MUTANTS=--help")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "planner.nodes" in proc.stdout and "kube.clock" in proc.stdout and "act.writer" in proc.stdout


def run_crash_check(_api, _env) -> None:
    """Its recipe only: while it runs, every pass of this venv crashes, this suite's included (docs/testing.md)."""
    assert recipe("crash-check") == [f"{VENV}/bin/python -m rwo_testkit.crash_check"]


RUNNERS = {
    "demo": run_demo, "dry-run": run_dry_run, "run": run_run, "lint-imports": run_lint_imports, "lint": run_lint,
    "test": lambda _api, _env: run_collecting("test"), "quick": lambda _api, _env: run_collecting("quick"),
    "e2e": lambda _api, _env: run_collecting("e2e"), "clean": run_clean, "mutants": run_mutants,
    "crash-check": run_crash_check,
}


@pytest.mark.parametrize("target", sorted(RUNNERS))
def test_each_make_target_runs(target, api, outage, tmp_path):
    runner = RUNNERS[target]
    if target == "clean":
        runner(api, outage, tmp_path)
    else:
        runner(api, outage)


def fake_python(tmp_path: Path, version: str) -> Path:
    """An interpreter that is too old: what `make` sees on a machine with Python 3.10."""
    path = tmp_path / "python3.10"
    path.write_text(f"#!/bin/sh\ncase \"$*\" in *version_info*) exit 1;; *--version*) echo 'Python {version}';; "
                    f"*python_version*) echo {version};; esac\n")
    path.chmod(0o755)
    return path


def test_python_below_3_11_stops_first_with_a_plain_message(tmp_path):
    shutil.copy(ROOT / "Makefile", tmp_path)
    shutil.copy(ROOT / "requirements.txt", tmp_path)
    python = fake_python(tmp_path, "3.10.12")
    proc = subprocess.run(["make", "demo", f"PYTHON={python}"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env=CLEAN_ENV)
    assert proc.returncode != 0
    assert "rwo-failover needs Python 3.11 or newer" in proc.stderr and "Python 3.10.12" in proc.stderr
    assert "make PYTHON=python3.11 demo" in proc.stderr
    assert "pip" not in proc.stdout + proc.stderr, "nothing was installed"
    assert not (tmp_path / ".venv").exists()


@pytest.mark.parametrize("state", ["half-built", "other-python", "interpreter-gone"])
def test_a_stale_or_half_built_venv_is_rebuilt_from_scratch(tmp_path, state):
    """`make -n` shows what set-up would do: remove .venv and start again."""
    shutil.copy(ROOT / "Makefile", tmp_path)
    shutil.copy(ROOT / "requirements.txt", tmp_path)
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    if state == "half-built":  # the interpreter is fine, the set-up never finished (no stamp)
        (bin_dir / "python").symlink_to(sys.executable)
    elif state == "other-python":  # finished, but by another interpreter
        (bin_dir / "python").write_text("#!/bin/sh\necho 3.9.2\n")
        (bin_dir / "python").chmod(0o755)
        (tmp_path / ".venv" / ".runtime").touch()
    else:  # finished, and its interpreter was removed since
        (bin_dir / "python").symlink_to(tmp_path / "gone" / "python3")
        (tmp_path / ".venv" / ".runtime").touch()
    proc = subprocess.run(["make", "-n", "demo"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env=CLEAN_ENV)
    assert proc.returncode == 0, proc.stderr
    assert "rm -rf .venv" in proc.stdout and "-m venv .venv" in proc.stdout


def test_a_finished_venv_is_kept(tmp_path):
    shutil.copy(ROOT / "Makefile", tmp_path)
    shutil.copy(ROOT / "requirements.txt", tmp_path)
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(shutil.which("python3"))
    (tmp_path / ".venv" / ".runtime").touch()
    proc = subprocess.run(["make", "-n", "demo"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env=CLEAN_ENV)
    assert proc.stdout.splitlines() == [".venv/bin/python -m rwo_testkit.demo"], proc.stdout


# --- the wheelhouse across Python versions ------------------------------------------------------------------

OTHER_PYTHONS = ([Path(os.environ["OTHER_PYTHON"])] if os.environ.get("OTHER_PYTHON") else []) + \
    sorted(Path("/root/.pyenv/versions").glob("3.1[2-9]*/bin/python")) + \
    [Path(p) for p in (shutil.which("python3.12"), shutil.which("python3.13")) if p]


def other_python() -> Path:
    """A second Python, 3.12 or newer: OTHER_PYTHON, or pyenv's (this kind of machine has 3.12 and 3.13 under
    /root/.pyenv, and .ci/run says which it found), or one on PATH. Without one this is a skip here and a
    failure where CI requires everything to run (E2E_REQUIRED), as for helpers.real_tool."""
    if not OTHER_PYTHONS:
        message = "needs a second Python (3.12 or newer) besides this 3.11: set OTHER_PYTHON to one"
        if os.environ.get("E2E_REQUIRED"):
            pytest.fail(message)
        pytest.skip(message)
    return OTHER_PYTHONS[0]


def fake_wheel(folder: Path, tag: str) -> tuple[str, str]:
    """A real, installable wheel of `rwofake` 1.0 for one interpreter only (`cp311-none-any`, say): what a
    compiled dependency's wheels are to pip. Its file name and sha256."""
    import base64
    import hashlib
    import zipfile

    name = f"rwofake-1.0-{tag}.whl"
    files = {"rwofake/__init__.py": f"BUILT_FOR = {tag!r}\n",
             "rwofake-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: rwofake\nVersion: 1.0\n",
             "rwofake-1.0.dist-info/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n"}
    record = "".join(f"{path},sha256="
                     f"{base64.urlsafe_b64encode(hashlib.sha256(body.encode()).digest()).rstrip(b'=').decode()},"
                     f"{len(body.encode())}\n" for path, body in files.items()) + "rwofake-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(folder / name, "w") as archive:
        for path, body in {**files, "rwofake-1.0.dist-info/RECORD": record}.items():
            archive.writestr(path, body)
    return name, hashlib.sha256((folder / name).read_bytes()).hexdigest()


class Index:
    """A package index (PEP 503, over HTTP on loopback) that can go offline."""

    def __init__(self, root: Path) -> None:
        import functools
        import http.server
        import threading

        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
        handler.log_message = lambda *args: None
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple/"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.slow
def test_after_a_python_upgrade_the_rebuilt_venv_gets_that_pythons_wheels(tmp_path):
    """The wheelhouse held only the first interpreter's wheels and said it was complete: after an upgrade the
    rebuild failed with pip's "No matching distribution", even online, and again after `make clean`. Here a
    real second interpreter, real pip, and a dependency whose wheels are per interpreter."""
    other = other_python()
    other_tag = "cp" + subprocess.run([str(other), "-c", "import sys; print(*sys.version_info[:2], sep='')"],
                                      capture_output=True, text=True, check=True).stdout.strip()
    assert other_tag != "cp311"
    clone, simple = tmp_path / "clone", tmp_path / "index" / "simple" / "rwofake"
    clone.mkdir()
    simple.mkdir(parents=True)
    shutil.copy(ROOT / "Makefile", clone)
    wheels = [fake_wheel(simple, f"{tag}-none-any") for tag in ("cp311", other_tag)]
    (clone / "requirements.txt").write_text("rwofake==1.0 " + " ".join(f"--hash=sha256:{h}" for _, h in wheels) + "\n")
    index = Index(tmp_path / "index")
    env = {**CLEAN_ENV, "PIP_INDEX_URL": index.url, "PIP_CONFIG_FILE": os.devnull}

    def set_up(python: str) -> str:
        proc = subprocess.run(["make", "--no-print-directory", ".venv/.runtime", f"PYTHON={python}"], cwd=clone,
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return subprocess.run([str(clone / ".venv/bin/python"), "-c", "import rwofake; print(rwofake.BUILT_FOR)"],
                              capture_output=True, text=True, check=True).stdout.strip()

    try:
        assert set_up(sys.executable) == "cp311-none-any"
        assert set_up(str(other)) == f"{other_tag}-none-any", "the upgrade: the venv is rebuilt with its wheels"
    finally:
        index.close()  # from here on, offline
    subprocess.run(["make", "clean"], cwd=clone, env=env, check=True, capture_output=True, timeout=60)
    assert set_up(str(other)) == f"{other_tag}-none-any", "after make clean, offline"
    assert set_up(sys.executable) == "cp311-none-any", "and back, offline"
