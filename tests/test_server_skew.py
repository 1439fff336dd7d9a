"""MIN_NOT_READY_SECONDS cannot be cancelled by the control plane's own clocks (issue 35, hole 5).

NotReady and the Lease are aged by managedFields stamps made on the clock of whichever kube-apiserver handled the
write, and compared with the Date of the server answering the pass. With several API servers behind a load
balancer and the stamping one 6 s behind the answering one, a verdict 0.3 s old looked 6.3 s old, and the 3 s wait
(there for a heartbeat that crossed the verdict) came to nothing. The wait now also holds on this process's own
observation of the verdict, on its monotonic clock (observe/sightings.py). These passes are fresh processes (no
memory of earlier sightings), in-process through main() with the real clock.
"""

from __future__ import annotations

import io
import json
import threading
import time

from conftest import SESSION_LOG
from helpers import attached, detached, stuck

from rwo_failover.model import Node
from rwo_failover.observe.sightings import Sightings
from rwo_failover.run.cli import main
from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit import fake_cluster as fc


def fresh_process_pass(kubeconfig: str, **env: str) -> tuple[int, list[dict], float]:
    """One run of a new process (a CronJob's Job): main() with the real sleep and no memory of earlier sightings."""
    environ = {"KUBECONFIG": kubeconfig, "LOG_FORMAT": "json", "PASS_TIMEOUT_SECONDS": "30", **env}
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    code = main(["--once"], environ, stdout=out, stderr=err, sleep=time.sleep)
    took = time.monotonic() - started
    SESSION_LOG.add(out.getvalue())
    SESSION_LOG.add(err.getvalue())
    return code, [json.loads(line) for line in out.getvalue().splitlines() if line.strip()], took


def stamped_by_a_server_behind(api, behind: float = 6.0, true_age: float = 0.3) -> None:
    """A node the node lifecycle controller marked Ready=Unknown `true_age` seconds ago, through an API server
    whose clock is `behind` seconds slow: its stamp reads `behind + true_age` seconds old on the answering
    server's clock. Its Lease has been silent for long (the controller's grace ran out), and a stuck pod with an
    attached RWO claim is on it."""
    for i in range(4):
        fc.live_node(api, f"w{i}")
    api.add(fc.node("dead", ready="Unknown", since=behind + true_age, taints=[fc.SHUTDOWN, fc.UNREACHABLE]))
    api.add(fc.lease("dead", 60))
    stuck(api, "dead")


def deletes(api) -> list:
    return [r for r in api.requests if r.verb == "delete" and r.resource in ("pods", "volumeattachments")]


def test_a_verdict_that_only_looks_old_is_not_acted_on_before_this_process_has_seen_it_for_long(api, kubeconfig):
    """The issue's case: by the stamps the verdict is 6.3 s old, over the 3 s wait; this process has seen it for no
    time at all. Its first pass deletes nothing and says what it waits for; nothing is deleted until
    MIN_NOT_READY_SECONDS after the run first read the node (before, the first pass deleted at once)."""
    stamped_by_a_server_behind(api)

    code, logs, _took = fresh_process_pass(kubeconfig, ONCE_WAIT_SECONDS="0")

    first_read = min(r.at for r in api.requests if r.verb == "list" and r.resource == "nodes")
    assert deletes(api) and min(r.at for r in deletes(api)) - first_read >= 3.0, "not before its own sighting"
    verdicts = [line for line in logs if line["message"] == "node verdict" and line["node"] == "dead"]
    assert verdicts[0]["state"] == "not-yet" and "as long seen here" in verdicts[0]["reason"], verdicts[0]
    summaries = [line for line in logs if line["message"] == "pass finished"]
    assert summaries[0]["not_yet"] == 1 and summaries[0]["pods_deleted"] == 0 and code == EXIT_OK


def test_a_held_back_renewal_that_lands_within_the_wait_is_seen_and_nothing_is_freed(api, kubeconfig):
    """The renewal the kubelet sent just before the controller's verdict, held in a loaded API server's queue,
    lands 1.5 s after the verdict. The pass waits MIN_NOT_READY_SECONDS of its own sighting before it may act, so
    the renewal lands first, and the second pass sees the node alive: nothing is deleted (before, the first pass
    deleted the pod and its VolumeAttachment 1.2 s before the renewal landed)."""
    stamped_by_a_server_behind(api)
    renewal = threading.Timer(1.5 - 0.3, lambda: api.add(fc.lease("dead", 0)))
    renewal.start()
    try:
        code, logs, _took = fresh_process_pass(kubeconfig, ONCE_WAIT_SECONDS="10")
    finally:
        renewal.cancel()

    assert deletes(api) == [] and api.objects("pods") != [] and len(attached(api)) == 1
    passes = [line for line in logs if line["message"] == "pass finished"]
    assert len(passes) == 2 and passes[0]["not_yet"] == 1, passes
    assert passes[1]["split_brain"] == 1 and code != EXIT_OK, "the renewal after the verdict is a sign of life"


def test_without_a_renewal_the_pass_waits_its_own_sighting_out_and_frees_the_node(api, kubeconfig):
    """The same verdict, and no renewal: the run waits until this process has seen Ready=Unknown for
    MIN_NOT_READY_SECONDS, passes again, and frees the node in the same run."""
    stamped_by_a_server_behind(api)

    code, logs, took = fresh_process_pass(kubeconfig, ONCE_WAIT_SECONDS="10")

    assert code == EXIT_OK and api.objects("pods") == [] and detached(api) == []
    waited = [line for line in logs if line["message"].startswith("waiting for a node to be proven down")]
    assert len(waited) == 1 and waited[0]["node"] == "dead", logs
    passes = [line for line in logs if line["message"] == "pass finished"]
    assert [p["not_yet"] for p in passes] == [1, 0] and passes[-1]["pods_deleted"] == 1
    assert took >= 3.0, "MIN_NOT_READY_SECONDS of its own sighting"


# --- the memory itself -----------------------------------------------------------------------------------------

def _node(name: str, ready: str, since: str = "2026-11-28T00:00:00Z", uid: str = "u1") -> Node:
    raw = fc.node(name, ready=ready, since=60)
    raw["metadata"]["uid"] = uid
    next(c for c in raw["status"]["conditions"] if c["type"] == "Ready")["lastTransitionTime"] = since
    return Node.from_json(raw)


def test_a_sighting_ages_on_the_monotonic_clock_and_a_new_transition_is_a_new_sighting():
    clock = [100.0]
    seen = Sightings(monotonic=lambda: clock[0])
    assert seen.update([_node("a", "Unknown"), _node("b", "True")]) == {"a": 0.0}
    clock[0] = 104.0
    assert seen.update([_node("a", "Unknown")]) == {"a": 4.0}
    assert seen.age(_node("a", "Unknown")) == 4.0
    assert seen.age(_node("a", "Unknown", since="2026-11-28T00:01:00Z")) == 0.0, "another transition: anew"
    clock[0] = 106.0
    assert seen.update([_node("a", "Unknown", uid="u2", since="2026-11-28T00:01:00Z")]) == {"a": 0.0}, \
        "another Node object: anew"
    assert seen.update([_node("a", "True")]) == {}
    clock[0] = 107.0
    assert seen.update([_node("a", "Unknown", uid="u2", since="2026-11-28T00:01:00Z")]) == {"a": 0.0}, \
        "seen Ready in between: forgotten"


def test_stopped_instances_still_count_neither_way_for_a_process_that_has_just_seen_them(api, kubeconfig):
    """Found on the real control plane (tests/e2e/test_e2e_liveness.py): six stopped instances (shutdown taint,
    NotReady for 10 minutes, nothing on them) beside three live nodes and a real outage. A new process had seen
    none of them NotReady itself, so none was proven down, none was left out of the unhealthy fraction as a
    stopped instance, and every CronJob run refused (7 of 10 not Ready) without ever waiting. Down by the
    server's stamps with nothing to release, they count neither way while the run waits its own sighting out."""
    for i in range(3):
        fc.live_node(api, f"w{i}")
    for i in range(6):
        fc.dead_node(api, f"stopped-{i}")
    fc.dead_node(api, "dead")
    stuck(api, "dead")

    code, logs, _took = fresh_process_pass(kubeconfig)

    summaries = [line for line in logs if line["message"] == "pass finished"]
    assert [s["brake"] for s in summaries] == ["", ""], summaries
    assert code == EXIT_OK and api.objects("pods") == [] and detached(api) == []
