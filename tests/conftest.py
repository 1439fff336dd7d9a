"""Shared fixtures: a fake API server over loopback, and a runner for one pass."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import settings as hsettings

from rwo_failover.observe.sightings import Sightings
from rwo_failover.run.cli import main
from rwo_testkit import log_sink
from rwo_testkit.fake_apiserver import TOKEN, FakeApiServer
from rwo_testkit.log_sink import plant, planted_secrets  # noqa: F401 - for the tests: from conftest import plant

# The e2e tier's fixtures (a real control plane per module) and its figures at the end of the run.
pytest_plugins = ["rwo_testkit.e2e"]

# Property tests that set no max_examples of their own (the fuzz tier, tests/test_fuzz*.py): bounded for
# `make test`, longer in CI (.ci/run sets HYPOTHESIS_PROFILE=ci).
hsettings.register_profile("fast", max_examples=150, deadline=None)
hsettings.register_profile("ci", max_examples=2000, deadline=None)
hsettings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Run:
    code: int
    logs: list[dict]
    stderr: str
    requests: list = field(default_factory=list)
    sleeps: list = field(default_factory=list)  # delays the retry layer asked for; none were really slept

    def lines(self, message: str) -> list[dict]:
        return [line for line in self.logs if line.get("message") == message]

    @property
    def summary(self) -> dict:
        found = self.lines("pass finished")
        assert len(found) == 1, f"expected one summary line, got {len(found)}: {self.logs}"
        return found[0]


# Every request any fixture server saw during the session, for the RBAC test that runs last.
SESSION_REQUESTS: list = []
# Every log line any test produced, and every secret any test planted, for the secrets test that runs last
# (tests/test_secrets.py). The fixture API server's bearer token is in every kubeconfig the suite writes.
SESSION_LOG = log_sink.SESSION
SESSION_LOG.install()
plant(TOKEN)


def pytest_collection_modifyitems(items: list) -> None:
    # The RBAC-usage test judges the whole suite's request log, so it must run after everything else.
    items.sort(key=lambda item: item.get_closest_marker("after_all") is not None)


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "after_all: runs after every other test (reads the suite's request log)")


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        server.listeners.append(SESSION_REQUESTS.append)
        yield server


@pytest.fixture
def kubeconfig(api: FakeApiServer, tmp_path: Path) -> str:
    return api.write_kubeconfig(str(tmp_path / "kubeconfig"))


# A fixture pass stands for a pass of a process that has watched the cluster since before each node went NotReady
# (continuous mode's leader): its own sighting of Ready=Unknown (observe/sightings.py) never holds the pass back,
# the server's stamps judge. A one-shot process's own wait for it is tested where it is the subject
# (tests/test_server_skew.py, and the real reconcile.py in tests/test_once_wait.py).
WATCHED_FOR = 86400.0


def watched() -> Sightings:
    """The sightings of such a process: pass it to main() where a test's pass stands for one."""
    return Sightings(watched_for=WATCHED_FOR)


@pytest.fixture
def run_pass(api: FakeApiServer, kubeconfig: str):
    """Run one pass in-process against the fixture; extra settings come as environment variables."""
    def run(*argv: str, **env: str) -> Run:
        # ONCE_WAIT_SECONDS=0: each call is one pass, judged as it finds the fixture (tests/test_once_wait.py runs
        # the wait for a node about to be proven down, in a real process whose clock moves).
        environ = {"KUBECONFIG": kubeconfig, "LOG_FORMAT": "json", "PASS_TIMEOUT_SECONDS": "20",
                   "ONCE_WAIT_SECONDS": "0", **env}
        out, err = io.StringIO(), io.StringIO()
        before = len(api.requests)
        sleeps: list[float] = []
        code = main(["--once", *argv], environ, stdout=out, stderr=err, sleep=sleeps.append,
                    sightings=watched())
        SESSION_LOG.add(out.getvalue())
        SESSION_LOG.add(err.getvalue())
        logs = [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]
        return Run(code, logs, err.getvalue(), api.requests[before:], sleeps)
    return run


# The wheels of the pinned requirements, downloaded once (per Python version) by `make` (see the Makefile):
# tests that install into a fresh venv read only from here, so the suite runs offline after the first set-up.
WHEELHOUSE = ROOT / os.environ.get("WHEELHOUSE", ".wheelhouse")


def fresh_venv(path: Path, *requirements: str) -> Path:
    """A new venv at `path`, with `requirements` (pip arguments) installed from the wheelhouse alone: no index,
    and none of this machine's pip configuration."""
    if not any(WHEELHOUSE.glob("*.whl")):
        pytest.fail(f"no wheelhouse at {WHEELHOUSE}: set up with `make .venv/.dev` (or `make test`) first")
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    subprocess.run([str(path / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--no-index", "--find-links", str(WHEELHOUSE), *requirements], check=True, timeout=300,
                   env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
    return path
