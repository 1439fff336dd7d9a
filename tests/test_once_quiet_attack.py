"""Attacks on one-shot mode's wait for a quiet node (issue 29): what the wait must never do.

The wait decides only *when* the run passes again. It must not pass again for a node no pass would judge (an
opted-out node, whose shutdown taint was there all along), nor after a stop signal, nor later than the time
it kept for the next pass. These run the real reconcile.py as a process against the fixture API server.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from conftest import ROOT
from helpers import attached, tainted_node
from test_once_quiet import QUIET_MESSAGE, later, lease_lists, quiet_node
from test_once_wait import MIN, one_pass

from rwo_failover.model.names import NODE_OPT_OUT_LABEL
from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import Fault

PASSED_AGAIN = "a quiet node carries a shutdown taint now: passing again"


def passes(logs: list[dict]) -> list[dict]:
    return [line for line in logs if line["message"] == "pass finished"]


def test_an_opted_out_stopped_node_never_makes_the_run_pass_again(api, kubeconfig):
    """A stopped instance whose Node is kept and opted out (shutdown taint, Lease silent for an hour): no pass
    ever judges it, so passing again for it only doubles every CronJob run's reads, for as long as it exists."""
    for i in range(3):
        fc.live_node(api, f"w{i}")
    tainted_node(api, "off", not_ready_for=3600, lease_renewed_ago=3600)
    node = api.get("nodes", "off")
    node["metadata"].setdefault("labels", {})[NODE_OPT_OUT_LABEL] = "true"
    api.add(node)

    code, logs, took = one_pass(kubeconfig)

    assert code == EXIT_OK
    assert not [line for line in logs if line["message"] == PASSED_AGAIN], "nothing new about it to judge"
    assert len(passes(logs)) == 1


def test_a_stop_signal_during_the_wait_starts_no_second_pass(api, kubeconfig):
    """SIGTERM lands while the wait's read of a quiet node is in flight, and that read finds the shutdown taint:
    the run must end with the first pass's result, as a stop during the proof's wait does, not pass again."""
    for i in range(3):
        fc.live_node(api, f"w{i}")
    quiet_node(api)
    proc: list[subprocess.Popen] = []

    def taint_and_stop(req):
        if req.verb == "get" and req.resource == "nodes" and req.name == "dead" and lease_lists(api) and proc:
            api.hooks.clear()
            tainted_node(api, "dead", not_ready_for=0, lease_renewed_ago=49)
            proc[0].send_signal(signal.SIGTERM)
            time.sleep(0.5)  # the signal is handled while this read is in flight
        return None

    api.hooks.append(taint_and_stop)
    proc.append(subprocess.Popen(
        [sys.executable, str(ROOT / "reconcile.py"), "--once"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        env={"PATH": "/usr/bin:/bin", "KUBECONFIG": kubeconfig, "LOG_FORMAT": "json", "MIN_NOT_READY_SECONDS": MIN}))
    out, _ = proc[0].communicate(timeout=120)
    logs = [json.loads(line) for line in out.splitlines() if line.strip()]

    assert [line for line in logs if line["message"] == QUIET_MESSAGE], "the wait ran"
    assert [line for line in logs if line["message"].startswith("stop requested")], "the signal was seen"
    assert len(passes(logs)) == 1, "no pass starts after a stop signal"
    assert proc[0].returncode == EXIT_OK


def test_slow_reads_never_stretch_the_wait_past_the_time_it_kept_for_the_next_pass(api, kubeconfig):
    """Five quiet nodes (MAX_NODES_PER_PASS), each Lease read taking 4 s: a round of reads outlasts the whole
    budget. The last node is tainted in the middle of it. A second pass that starts after the budget has
    ended starts without the third of PASS_TIMEOUT_SECONDS, the MIN_NOT_READY_SECONDS and the slack the budget
    kept for it: the run must stop reading at the budget's end and not pass again then."""
    for i in range(3):
        fc.live_node(api, f"w{i}")
    for i in range(5):  # Ready, untainted, their Leases silent for 45 s
        api.add(fc.node(f"q{i}", ready="True", since=86400))
        api.add(fc.lease(f"q{i}", 45, 40))
    api.faults.append(Fault("timeout", verb="get", resource="leases", delay=4.0))

    def taint_last(req):
        if req.verb == "get" and req.resource == "leases" and req.name == "q1":
            api.hooks.clear()
            tainted_node(api, "q4", not_ready_for=0, lease_renewed_ago=49)
        return None

    api.hooks.append(taint_last)
    code, logs, took = one_pass(kubeconfig, PASS_TIMEOUT_SECONDS="30", MIN_NOT_READY_SECONDS="3")

    assert [line for line in logs if line["message"] == QUIET_MESSAGE], "the wait ran"
    [budget] = [line["wait_seconds"] for line in logs if line["message"] == QUIET_MESSAGE]
    assert budget < 16, "30 s less a third, MIN_NOT_READY_SECONDS and the slack, less the first pass"
    assert not [line for line in logs if line["message"] == PASSED_AGAIN], \
        "the taint was read only after the budget had ended: no time was left for what it was kept for"
    assert len(passes(logs)) == 1 and code == EXIT_OK


def test_a_hanging_read_of_a_quiet_node_ends_the_run_at_once_wait_seconds_not_at_the_pass_deadline(api, kubeconfig):
    """The API server stops answering reads of the quiet node (an overloaded server in the outage itself). The
    wait's reads were bounded only by PASS_TIMEOUT_SECONDS (45 s): a run whose pass took a second held its Job
    to the deadline, so ONCE_WAIT_SECONDS=5 bounded nothing, and with the metrics push the Job neared its
    activeDeadlineSeconds (55). Each read of the wait is bounded by what is left of its budget."""
    for i in range(3):
        fc.live_node(api, f"w{i}")
    quiet_node(api)
    api.faults.append(Fault("timeout", verb="get", resource="nodes", name="dead", delay=50.0))

    code, logs, took = one_pass(kubeconfig, ONCE_WAIT_SECONDS="5")

    assert [line for line in logs if line["message"] == QUIET_MESSAGE], "the wait ran"
    assert code == EXIT_OK and len(passes(logs)) == 1, "the first pass's result stands"
    assert took < 20, f"the run took {took:.1f} s: its reads outlived ONCE_WAIT_SECONDS=5 by far"


def test_a_partition_seen_at_notready_still_trips_the_brake_after_the_wait(api, kubeconfig):
    """Four kubelets go quiet at once (MAX_NODES_PER_PASS=5 lets the run wait). NotReady comes to all four, and
    the cloud's shutdown taint to one: the wait passes again at that taint, and the passes after it refuse, as
    a single pass then would (the unhealthy fraction, 3 of 5 other nodes): the wait changes only when."""
    for i in range(2):
        fc.live_node(api, f"w{i}")
    quiet_node(api)
    for i in range(3):
        api.add(fc.node(f"p{i}", ready="True", since=86400))
        api.add(fc.lease(f"p{i}", 45, 40))

    def notready():
        for i in range(3):
            api.add(fc.node(f"p{i}", ready="Unknown", since=0))
        tainted_node(api, "dead", not_ready_for=0, lease_renewed_ago=49)

    change = later(4, notready)
    code, logs, took = one_pass(kubeconfig, MIN_NOT_READY_SECONDS="3")
    change.join()

    assert [line["nodes"] for line in logs if line["message"] == QUIET_MESSAGE] == [["dead", "p0", "p1", "p2"]]
    assert [line["node"] for line in logs if line["message"] == PASSED_AGAIN] == ["dead"]
    assert code == 3 and passes(logs)[-1]["brake"] == "unhealthy-fraction"
    assert len(api.objects("pods")) == 1 and len(attached(api)) == 1, "nothing freed"
