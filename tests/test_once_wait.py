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

import pytest
from conftest import ROOT
from helpers import detached, stuck, tainted_node

from rwo_failover.run.exitcodes import EXIT_OK, EXIT_REFUSED
from rwo_testkit import fake_cluster as fc


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
    # By the server's stamps the node is down 4 s from now; a new process has not seen it NotReady itself, and
    # waits MIN_NOT_READY_SECONDS (8 s here) of its own sighting (issue 35), which comes later: the wait is that.
    about_to_be_down(api, 4, min_seconds=8)

    code, logs, took = one_pass(kubeconfig, MIN_NOT_READY_SECONDS="8")

    assert code == EXIT_OK
    assert api.objects("pods") == [] and detached(api) == [], "freed in the same run"
    passes = [line for line in logs if line["message"] == "pass finished"]
    assert [p["not_yet"] for p in passes] == [1, 0] and passes[-1]["pods_deleted"] == 1
    waited = [line for line in logs if line["message"].startswith("waiting for a node to be proven down")]
    assert len(waited) == 1 and waited[0]["node"] == "dead" and 7 <= waited[0]["wait_seconds"] <= 9
    assert took < 45


def test_a_split_brain_node_does_not_end_the_run_before_a_node_due_soon_is_freed(api, kubeconfig):
    """Exit 3 for a node heartbeating under a shutdown taint comes back every pass; it must not keep a run from
    waiting for another node proven down moments later (its own sighting, issue 35), or no run ever would."""
    about_to_be_down(api, 2, min_seconds=4)
    tainted_node(api, "alive", not_ready_for=30, lease_renewed_ago=2)
    stuck(api, "alive", name="web-0")

    code, logs, _took = one_pass(kubeconfig, MIN_NOT_READY_SECONDS="4")

    passes = [line for line in logs if line["message"] == "pass finished"]
    assert [(p["not_yet"], p["split_brain"]) for p in passes] == [(1, 1), (0, 1)], passes
    assert code == EXIT_REFUSED and passes[-1]["pods_deleted"] == 1
    assert {p["metadata"]["name"] for p in api.objects("pods")} == {"web-0"}


def test_a_wait_that_would_not_leave_a_pass_its_time_is_not_taken(api, kubeconfig):
    """With PASS_TIMEOUT_SECONDS=31 a wait of 25 s would leave the second pass 6 s, under the third it needs: the
    next CronJob pass does it instead."""
    about_to_be_down(api, 25, min_seconds=10)

    code, logs, took = one_pass(kubeconfig, MIN_NOT_READY_SECONDS="10", PASS_TIMEOUT_SECONDS="31",
                                REQUEST_TIMEOUT_SECONDS="5")

    assert code == EXIT_OK and len(api.objects("pods")) == 1
    assert [line["not_yet"] for line in logs if line["message"] == "pass finished"] == [1]
    assert took < 25


def test_a_not_ready_wait_no_run_can_pass_is_refused_at_start_up(api, kubeconfig):
    """A new process proves a node down only after seeing it NotReady for MIN_NOT_READY_SECONDS itself, inside
    PASS_TIMEOUT_SECONDS less the third kept for acting: MIN_NOT_READY_SECONDS=60 (the old default) with the
    default 45 s could never fit, and every CronJob run exited 0 and freed nothing (found by an attack on issue
    35). Exit 2, naming both settings, before any API call."""
    about_to_be_down(api, 0, min_seconds=60)
    before = len(api.requests)

    code, _logs, _took = one_pass(kubeconfig, MIN_NOT_READY_SECONDS="60")

    assert code == 2 and len(api.requests) == before


@pytest.mark.parametrize("timeout, wait, needed", [("9", "6", 17), ("45", "26", 47)],
                         ids=["old-bound-9-6", "defaults-45-26"])
def test_a_wait_that_leaves_no_time_for_a_slow_first_pass_is_refused_at_start_up(api, kubeconfig, timeout, wait,
                                                                                 needed):
    """The arithmetic of the run, at start-up: a first pass may take FIRST_PASS_SECONDS (6 s: a first node list on
    a loaded API server, and 1 s of margins) before the wait begins. Start-up accepted 6 s of 9 and 30 s of 45 (the
    wait alone within two thirds), and with a first list slower than 2 s every run exited 1 and freed nothing.
    Exit 2 before any API call, naming the PASS_TIMEOUT_SECONDS the wait needs, which is then accepted."""
    before = len(api.requests)
    done = subprocess.run([sys.executable, str(ROOT / "reconcile.py"), "--once"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "KUBECONFIG": kubeconfig,
                                                      "MIN_NOT_READY_SECONDS": wait, "PASS_TIMEOUT_SECONDS": timeout,
                                                      "REQUEST_TIMEOUT_SECONDS": "3"})
    assert done.returncode == 2 and len(api.requests) == before
    assert f"MIN_NOT_READY_SECONDS={wait} cannot pass within one run" in done.stderr, done.stderr
    assert f"PASS_TIMEOUT_SECONDS of at least {needed} for this wait" in done.stderr, done.stderr
    # and what it names is accepted
    accepted = subprocess.run([sys.executable, str(ROOT / "reconcile.py"), "--once", "--dry-run"], cwd=ROOT,
                              capture_output=True, text=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin", "KUBECONFIG": kubeconfig, "LOG_FORMAT": "json",
                                   "MIN_NOT_READY_SECONDS": wait, "PASS_TIMEOUT_SECONDS": str(needed),
                                   "REQUEST_TIMEOUT_SECONDS": "3", "ONCE_WAIT_SECONDS": "0"})
    assert accepted.returncode == 0, accepted.stderr


@pytest.mark.parametrize("env", [{"ONCE_WAIT_SECONDS": "0"}, {"ONCE_WAIT_SECONDS": "2"}],
                         ids=["once-wait-0", "once-wait-below-min-not-ready"])
def test_a_run_always_waits_its_own_sighting_of_a_node_long_down(api, kubeconfig, env):
    """Found by an attack on issue 35: a node down for ten minutes by every stamp is only "not yet" to a new
    process, which must see it NotReady for MIN_NOT_READY_SECONDS itself; with ONCE_WAIT_SECONDS below that (0
    included) no run ever waited, and no CronJob run ever freed it. That wait is taken whatever ONCE_WAIT_SECONDS
    says (it is what every failover of a one-shot run needs), and the run frees the node."""
    for i in range(4):
        fc.live_node(api, f"w{i}")
    fc.dead_node(api, "dead", down_for=600)
    stuck(api, "dead")

    code, logs, _took = one_pass(kubeconfig, MIN_NOT_READY_SECONDS="3", **env)

    assert code == EXIT_OK and api.objects("pods") == [] and detached(api) == []
    assert [line["not_yet"] for line in logs if line["message"] == "pass finished"] == [1, 0]


def test_once_wait_seconds_0_never_waits(api, kubeconfig):
    # 15 s, well inside the default ONCE_WAIT_SECONDS (30), so a pass that did wait would free the pod; and far
    # enough off that two process start-ups on a loaded 2-core machine cannot reach the proof (at 3 s they did,
    # and the second pass freed the pod without any wait).
    about_to_be_down(api, 15)

    code, logs, _ = one_pass(kubeconfig, ONCE_WAIT_SECONDS="0")
    assert code == EXIT_OK and len(api.objects("pods")) == 1
    assert [line["message"] for line in logs].count("pass finished") == 1


def test_a_dry_run_waits_as_a_real_run_does_and_shows_the_plan_it_would_act_on(api, kubeconfig):
    """A new process sees the node NotReady only now: a dry run that did not wait would always say "not yet" for
    it (issue 35). It waits its own sighting out, as a real run does, and plans the delete; nothing is written."""
    about_to_be_down(api, 2, min_seconds=4)

    code, logs, _ = one_pass(kubeconfig, DRY_RUN="true", MIN_NOT_READY_SECONDS="4")

    passes = [line for line in logs if line["message"] == "pass finished"]
    assert code == EXIT_OK and [p["not_yet"] for p in passes] == [1, 0] and passes[-1]["pods_planned"] == 1
    assert len(api.objects("pods")) == 1 and api.mutations() == []


def test_a_node_further_off_than_once_wait_seconds_is_left_to_the_next_pass(api, kubeconfig):
    about_to_be_down(api, 15)

    code, logs, took = one_pass(kubeconfig, ONCE_WAIT_SECONDS="10")

    assert code == EXIT_OK and len(api.objects("pods")) == 1 and took < 10
    assert [line["message"] for line in logs].count("pass finished") == 1


def test_the_lease_watch_start_up_counts_is_the_planner_s_for_the_default_lease():
    """settings/one_shot.py cannot import the planner (a lower layer): its figure for the Lease watch before a
    ForceOff is checked here against planner/redfish.py's rule."""
    from rwo_failover.model import Lease
    from rwo_failover.model.names import DEFAULT_LEASE_SECONDS
    from rwo_failover.planner.redfish import renews
    from rwo_failover.settings.one_shot import LEASE_WATCH_SECONDS

    lease = Lease.from_json(fc.lease("n", 1, duration=DEFAULT_LEASE_SECONDS))
    assert renews(lease) == LEASE_WATCH_SECONDS == 12
