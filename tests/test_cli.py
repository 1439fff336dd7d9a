"""The entry point: credentials, reachability, RBAC denial, and the real `python reconcile.py` process."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
from datetime import UTC
from pathlib import Path

import pytest
from conftest import ROOT, SESSION_LOG, watched
from helpers import detached

from rwo_failover.run.cli import main
from rwo_failover.run.exitcodes import EXIT_CONFIG, EXIT_CRASH, EXIT_FORBIDDEN, EXIT_OK, EXIT_UNAVAILABLE
from rwo_testkit import fake_cluster as fc


def run_main(env: dict) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--once"], {"LOG_FORMAT": "json", **env}, stdout=out, stderr=err, sightings=watched())
    return code, out.getvalue(), err.getvalue()


def test_missing_kubeconfig_exits_2_naming_the_path(tmp_path):
    missing = tmp_path / "nope.yaml"
    code, _, err = run_main({"KUBECONFIG": str(missing)})
    assert code == EXIT_CONFIG
    assert str(missing) in err and "does not exist" in err


def test_garbage_kubeconfig_exits_2(tmp_path):
    bad = tmp_path / "kubeconfig"
    bad.write_text("clusters: [this is: not, a kubeconfig\n")
    code, _, err = run_main({"KUBECONFIG": str(bad)})
    assert code == EXIT_CONFIG and "cannot load cluster credentials" in err


def test_unknown_context_exits_2(kubeconfig, api):
    code, _, err = run_main({"KUBECONFIG": kubeconfig, "KUBE_CONTEXT": "prod-eu"})
    assert code == EXIT_CONFIG and "prod-eu" in err
    assert api.requests == []


def test_unreachable_api_server_exits_4_after_bounded_retries(tmp_path, api):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    path = api.write_kubeconfig(str(tmp_path / "kc"))
    text = Path(path).read_text().replace(api.url, f"http://127.0.0.1:{port}")
    Path(path).write_text(text)

    code, out, _ = run_main({"KUBECONFIG": path, "API_MAX_ATTEMPTS": "3", "PASS_TIMEOUT_SECONDS": "17"})

    assert code == EXIT_UNAVAILABLE
    logs = [json.loads(line) for line in out.splitlines()]
    retries = [line for line in logs if line["message"] == "retrying API call"]
    assert [r["attempt"] for r in retries] == [1, 2]
    [error] = [line for line in logs if line["message"] == "cannot read the cluster; nothing was changed"]
    assert error["error"].startswith("list nodes") and "3 attempt(s)" in error["error"]


def test_rbac_denial_while_reading_names_the_verb_and_exits_5(run_pass, api):
    fc.dead_node(api, "dead")
    api.deny("list", "nodes")

    result = run_pass()

    assert result.code == EXIT_FORBIDDEN
    [error] = result.lines("cannot read the cluster; nothing was changed")
    assert "RBAC denies verb 'list' on nodes" in error["error"]
    assert len([r for r in result.requests if r.resource == "nodes"]) == 1, "a 403 is not retried"


def test_rbac_denial_while_acting_exits_5_and_does_not_stop_other_work(run_pass, api):
    fc.outage(api)
    api.deny("create", "events")

    result = run_pass()

    assert result.code == EXIT_FORBIDDEN
    assert api.objects("pods") == [] and detached(api) == []
    errors = [line["message"] for line in result.logs if line["level"] == "ERROR"]
    assert any("RBAC denies verb 'create' on events" in e for e in errors)
    [warning] = result.lines("cannot cross-check the Date header against the API server's own stamp; trusting "
                             "the Date header alone")
    assert "RBAC denies verb 'create' on events" in warning["error"]


def test_real_process_runs_one_pass_and_exits_0(api, kubeconfig):
    fc.outage(api)

    proc = subprocess.run([sys.executable, str(ROOT / "reconcile.py"), "--once"], capture_output=True, text=True,
                          env={"KUBECONFIG": kubeconfig, "PATH": "/usr/bin:/bin"}, timeout=60, cwd=ROOT)

    assert proc.returncode == EXIT_OK, proc.stderr
    SESSION_LOG.add(proc.stdout + proc.stderr)
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["message"] == "pass finished" and summary["pods_deleted"] == 1
    assert api.objects("pods") == []


def test_help_lists_every_setting_with_its_env_name():
    proc = subprocess.run([sys.executable, str(ROOT / "reconcile.py"), "--help"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0
    for name in ("MAX_NODES_PER_PASS", "--max-nodes-per-pass", "SHUTDOWN_TAINTS", "DRY_RUN"):
        assert name in proc.stdout


def test_kubeconfig_that_is_a_directory_exits_2(tmp_path):
    # Tests run as root here, so file permissions cannot make it unreadable; a directory cannot be read either.
    code, _, err = run_main({"KUBECONFIG": str(tmp_path)})
    assert code == EXIT_CONFIG and "cannot load cluster credentials" in err


@pytest.mark.parametrize("command", [[sys.executable, "-m", "rwo_failover", "--help"],
                                     [str(Path(sys.executable).parent / "rwo-failover"), "--help"]])
def test_installed_entry_points_run(command):
    """`python -m rwo_failover` and the `rwo-failover` console script (pyproject.toml) both reach the CLI."""
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert "--max-nodes-per-pass" in proc.stdout and "MAX_NODES_PER_PASS" in proc.stdout


def test_an_uncaught_exception_exits_70_with_its_traceback(api, run_pass, monkeypatch):
    """A bug ends with exit 70 and a logged traceback. No input over HTTP reaches one any more (issue 18),
    so the bug is simulated: a test double of observe that raises (rwo_testkit/crashing.py)."""
    from rwo_failover.run import runner
    from rwo_testkit.crashing import observe_that_crashes

    monkeypatch.setattr(runner, "observe", observe_that_crashes(1))
    result = run_pass()
    assert result.code == EXIT_CRASH
    [line] = result.lines("unexpected error; this is a bug in rwo-failover")
    assert "Traceback" in line["exc_info"]


def test_a_list_answer_of_the_wrong_shape_is_a_failed_read_not_a_bug(api, run_pass):
    """What this test's predecessor used as "a bug": a node list whose items are not objects. Since issue 18
    that is a skip, and a page that is not a list at all (a proxy's answer, say) a failed read: exit 4."""
    from rwo_testkit.fake_apiserver import Response

    fc.outage(api)
    api.hooks.append(lambda req: Response(200, b'[{"kind":"NodeList"}]', {"Content-Type": "application/json"})
                     if req.verb == "list" and req.resource == "nodes" else None)
    result = run_pass()
    assert result.code == EXIT_UNAVAILABLE and len(api.objects("pods")) == 1
    [line] = result.lines("cannot read the cluster; nothing was changed")
    assert "the answer is JSON list, not an object" in line["error"]  # retried first, as a body cut short is


@pytest.mark.parametrize("argv, expected", [
    (["--dry-run"], {"dry_run": True}),
    (["--dry-run=true"], {"dry_run": True}),
    (["--dry-run=false"], {"dry_run": False}),
    (["--dry-run", "--once"], {"dry_run": True}),
    (["--interval", "5", "--leader-election"], {"leader_election": True, "interval": 5.0}),
    (["--leader-election=false", "--interval=5"], {"leader_election": False}),
])
def test_boolean_flags_work_bare_and_with_a_value(argv, expected):
    """As kubectl's do: `--dry-run` alone means true, and `--dry-run=false` still works."""
    from rwo_failover import settings as config

    _args, settings = config.load(argv, {})
    assert {key: getattr(settings, key) for key in expected} == expected


@pytest.mark.parametrize("argv, names", [
    (["--once", "--no-such-flag"], "--no-such-flag"),
    (["--once", "--max-nodes-per-pass"], "--max-nodes-per-pass"),
    (["--once", "--dry"], "--dry"),  # no abbreviations: a typo must not silently mean another flag
    (["--once", "extra"], "extra"),
])
def test_argument_errors_are_one_line_with_the_setting_errors_prefix_and_exit_2(argv, names, tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "reconcile.py"), *argv], capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin", "KUBECONFIG": str(tmp_path / "none")})
    assert proc.returncode == EXIT_CONFIG
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("rwo-failover: configuration error: ") and names in lines[0], lines[0]
    assert proc.stdout == ""


def test_the_first_log_line_names_the_version_and_json_times_are_rfc3339_utc(api, kubeconfig):
    """Whatever the machine's time zone, `time` is RFC 3339 in UTC, as log stores expect."""
    import re
    from datetime import datetime

    from rwo_failover import __version__

    fc.outage(api)
    before = datetime.now(UTC)
    proc = subprocess.run([sys.executable, str(ROOT / "reconcile.py"), "--once", "--dry-run"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT,
                          env={"KUBECONFIG": kubeconfig, "PATH": "/usr/bin:/bin", "TZ": "America/Los_Angeles",
                               "LOG_FORMAT": "json"})
    assert proc.returncode == EXIT_OK, proc.stderr
    logs = [json.loads(line) for line in proc.stdout.splitlines()]
    assert logs[0]["message"] == "rwo-failover starting" and logs[0]["version"] == __version__
    for line in logs:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"]), line["time"]
    first = datetime.fromisoformat(logs[0]["time"])
    assert abs((first - before).total_seconds()) < 30
