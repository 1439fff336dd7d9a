"""One pass (a CronJob's) waits for a node that is about to be proven down (issue 29).

A CronJob passes once a minute. A pass that finds a node "not yet" down, with the moment it will be proven
down (on the server's clock) inside what is left of its own deadline, waits for that moment and passes again,
reading everything afresh: the failover comes at the proof, not up to a minute after it. These run the real
reconcile.py as a process, so the fixture's clock (its Date header) really moves while it waits.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from conftest import ROOT
from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit import fake_cluster as fc

from helpers import detached, stuck, tainted_node


def one_pass(kubeconfig: str, **env: str) -> tuple[int, list[dict], float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(ROOT / "reconcile.py"), "--once"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "KUBECONFIG": kubeconfig, "LOG_FORMAT": "json",
                               "MIN_NOT_READY_SECONDS": MIN, **env})
    logs = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return done.returncode, logs, time.monotonic() - started


MIN = "20"  # MIN_NOT_READY_SECONDS in these tests


def about_to_be_down(api, in_seconds: int, min_seconds: int = int(MIN)) -> None:
    """A dead node whose Lease has been silent long enough, NotReady for MIN_NOT_READY_SECONDS (`min_seconds`)
    less `in_seconds`: provably down `in_seconds` from now, by the server's stamps."""
    for i in range(3):
        fc.live_node(api, f"w{i}")
    tainted_node(api, "dead", not_ready_for=min_seconds - in_seconds, lease_renewed_ago=max(90, min_seconds + 30))
    stuck(api, "dead")


def test_a_pass_waits_for_a_node_proven_down_within_its_deadline_and_frees_it(api, kubeconfig):
    # 8 s off: a process start-up on a loaded machine (a second or more) still leaves a wait of several seconds.
    about_to_be_down(api, 8)

    code, logs, took = one_pass(kubeconfig)

    assert code == EXIT_OK
    assert api.objects("pods") == [] and detached(api) == [], "freed in the same run"
    passes = [line for line in logs if line["message"] == "pass finished"]
    assert [p["not_yet"] for p in passes] == [1, 0] and passes[-1]["pods_deleted"] == 1
    waited = [line for line in logs if line["message"].startswith("waiting for a node to be proven down")]
    assert len(waited) == 1 and waited[0]["node"] == "dead" and 2 <= waited[0]["wait_seconds"] <= 10
    assert took < 45


def test_a_wait_that_would_not_leave_a_pass_its_time_is_not_taken(api, kubeconfig):
    """With PASS_TIMEOUT_SECONDS=31 a wait of 30 s would leave the second pass a second, under the third it needs:
    the next CronJob pass does it instead. A start-up slower than 9 s would be needed to bring the wait within
    reach (at 15 s of 16, a loaded machine's 4 s start-up did)."""
    about_to_be_down(api, 30, min_seconds=60)

    code, logs, took = one_pass(kubeconfig, MIN_NOT_READY_SECONDS="60", PASS_TIMEOUT_SECONDS="31",
                                REQUEST_TIMEOUT_SECONDS="5")

    assert code == EXIT_OK and len(api.objects("pods")) == 1
    assert [line["not_yet"] for line in logs if line["message"] == "pass finished"] == [1]
    assert took < 30


def test_a_dry_run_and_once_wait_seconds_0_never_wait(api, kubeconfig):
    # 15 s, well inside the default ONCE_WAIT_SECONDS (30), so a pass that did wait would free the pod; and far
    # enough off that two process start-ups on a loaded 2-core machine cannot reach the proof (at 3 s they did,
    # and the second pass freed the pod without any wait).
    about_to_be_down(api, 15)

    for env in ({"DRY_RUN": "true"}, {"ONCE_WAIT_SECONDS": "0"}):
        code, logs, _ = one_pass(kubeconfig, **env)
        assert code == EXIT_OK and len(api.objects("pods")) == 1
        assert [line["message"] for line in logs].count("pass finished") == 1, env


def test_a_node_further_off_than_once_wait_seconds_is_left_to_the_next_pass(api, kubeconfig):
    about_to_be_down(api, 15)

    code, logs, took = one_pass(kubeconfig, ONCE_WAIT_SECONDS="10")

    assert code == EXIT_OK and len(api.objects("pods")) == 1 and took < 10
    assert [line["message"] for line in logs].count("pass finished") == 1
