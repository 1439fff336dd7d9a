"""FENCING=redfish's planner rules, pure: when a silent node becomes a candidate for its BMC's word, what it
waits for, and the brake that counts silent Leases. No I/O: Snapshot + Settings -> Plan."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from rwo_failover import settings as config
from rwo_failover.model import Lease, Node, Pod, Snapshot
from rwo_failover.planner import NodeState, judge_nodes, judge_untainted, pod_exclusion
from rwo_failover.planner.fencing import REQUEST, fence_step
from rwo_failover.planner.nodes import min_not_ready
from rwo_failover.planner.redfish import WITNESS, judge_silent, quiet, silent_brake
from rwo_failover.planner.types import RefusalKind

NOW = datetime(2026, 11, 25, 12, 0, 0, tzinfo=UTC)


def settings(**env: str) -> config.Settings:
    return dataclasses.replace(config.load(["--once"], {"FENCING": "none", **env})[1], fencing="redfish")


def node(name: str) -> Node:
    return Node(name, ready="True", status_written_at=NOW - timedelta(hours=1))


def lease(name: str, silent: float, version: str = "1") -> Lease:
    return Lease(name, None, 40, version, NOW - timedelta(seconds=silent))


def snapshot(silences: dict[str, float]) -> Snapshot:
    """Nodes whose Leases went silent so long ago, each seen unchanged here as long (observe/sightings.py)."""
    return Snapshot(NOW, tuple(node(n) for n in silences), {n: lease(n, s) for n, s in silences.items()},
                    lease_seen_for=dict(silences))


@pytest.mark.parametrize("silent, state", [(3, None), (11, None), (15, NodeState.NOT_YET), (25, NodeState.DOWN)])
def test_a_node_is_a_candidate_only_once_its_lease_is_silent_long_enough(silent, state):
    verdict = judge_silent(node("n"), lease("n", silent), settings(), now=NOW, observed=silent)
    assert (verdict.state if verdict else None) is state
    if state is NodeState.NOT_YET:  # continuous and one-shot mode wake for the moment it is due
        assert verdict.changes_at == NOW - timedelta(seconds=silent) + timedelta(seconds=1 + 20)


@pytest.mark.parametrize("observed, held", [(0.0, True), (11.9, True), (12.0, False)])
def test_a_lease_only_stamped_silent_is_not_powered_off_until_seen_unchanged_for_a_renewal_interval(observed, held):
    """Issue 35's attack: a renewal stamped by an API server 12 s behind reads 21 s old at the default
    REDFISH_SILENT_SECONDS=20; a kubelet renewing every 10 s would have its machine powered off. Its BMC may be
    asked (only its Off proves anything), but a power-off waits until this process has itself seen the Lease
    unchanged for a renewal interval (40 s / 4 + 2 s). Held, the verdict is still a candidate (down): the attack on
    issue 36 found a "not yet" here left a partition's silent nodes out of the brakes."""
    verdict = judge_silent(node("n"), lease("n", 25), settings(), now=NOW, observed=observed)
    assert verdict.state is NodeState.DOWN and verdict.sighting_pending is held
    if held:
        assert verdict.changes_at == NOW + timedelta(seconds=12 - observed)
        assert "powered off only once seen unchanged here for 12s" in verdict.reason


def test_a_renewal_while_the_pass_watched_is_never_a_candidate():
    verdict = judge_silent(node("n"), lease("n", 300, version="2"), settings(), now=NOW, seen="1", observed=0.0)
    assert verdict.state is NodeState.NOT_YET and "changed while this pass watched" in verdict.reason


def test_a_lease_stamped_after_the_servers_now_is_judged_neither_way():
    verdict = judge_silent(node("n"), lease("n", -30), settings(), now=NOW, observed=0.0)
    assert verdict.state is NodeState.NOT_YET and "clocks disagree" in verdict.reason


def test_no_lease_no_candidate():
    assert judge_silent(node("n"), None, settings(), now=NOW, observed=0.0) is None


def test_without_redfish_a_silent_untainted_node_is_never_judged():
    snap = snapshot({"a": 3, "b": 3, "silent": 300})
    assert judge_nodes(snap, dataclasses.replace(settings(), fencing="none")) == []
    [verdict] = judge_nodes(snap, settings())
    assert verdict.node == "silent" and verdict.state is NodeState.DOWN and verdict.taint == WITNESS


def test_the_brake_counts_silent_leases_and_refuses_before_any_bmc_is_asked():
    assert silent_brake(snapshot({"a": 3, "b": 3, "c": 300}), settings()) is None
    refusal = silent_brake(snapshot({"a": 3, "b": 300, "c": 300}), settings())
    assert refusal is not None and "Lease has been silent" in refusal.message
    # Silent nodes with nothing to free count neither way, as in the unhealthy-fraction brake.
    assert silent_brake(snapshot({"a": 3, "b": 300, "c": 300}), settings(), idle=frozenset({"b"})) is None


def test_every_pod_on_a_candidate_counts_as_stuck_and_the_bmcs_word_comes_first():
    """Before NotReady nothing has marked its pods: a Running, Ready pod is eligible there (as on any proven-down
    node since issue 25: a dead kubelet's last word is no alibi); the fencing step in this mode is always the
    BMC's word."""
    running = Pod("default", "web-0", "uid-1", "silent", phase="Running", ready="True")
    assert pod_exclusion(running, settings(), powered_off=True) is None
    assert fence_step(node("silent"), snapshot({"silent": 300}), settings())[0] == REQUEST


# Edges, each pinned by a mutant of planner/redfish.py that survived `make mutants` (docs/testing.md).

def test_a_status_post_while_ready_is_a_heartbeat_and_the_controllers_unknown_is_not():
    """The node lifecycle controller counts a status post as a heartbeat: a kubelet posting Ready=True 5 s ago
    runs, whatever its Lease says. Its own Ready=Unknown write is no heartbeat."""
    posting = Node("n", ready="True", status_written_at=NOW - timedelta(seconds=5))
    assert judge_silent(posting, lease("n", 600), settings(), now=NOW, observed=600.0) is None
    assert quiet(posting, lease("n", 600), settings(), now=NOW) is False
    marked = Node("n", ready="Unknown", status_written_at=NOW - timedelta(seconds=5))
    verdict = judge_silent(marked, lease("n", 600), settings(), now=NOW, observed=600.0)
    assert verdict is not None and verdict.state is NodeState.DOWN and not verdict.sighting_pending
    assert verdict.reason == ("Lease unrenewed for 599s (REDFISH_SILENT_SECONDS=20, renewals due every 10s); down "
                              "only once its BMC answers PowerState Off") and verdict.not_ready_since == ""


@pytest.mark.parametrize("silent, state, pending", [
    (21, NodeState.DOWN, False),   # unrenewed exactly REDFISH_SILENT_SECONDS (20 s after the stamp's second)
    (20.5, NodeState.NOT_YET, False),
    (13, NodeState.NOT_YET, False),  # exactly a renewal interval (12 s): a renewal missed
    (12.5, None, False),
])
def test_the_silence_bounds_are_inclusive(silent, state, pending):
    verdict = judge_silent(node("n"), lease("n", silent), settings(), now=NOW, observed=silent)
    assert (verdict.state if verdict else None) is state
    if state is NodeState.NOT_YET:
        assert verdict.reason == f"Lease unrenewed for {silent - 1:.0f}s (needs 20s, REDFISH_SILENT_SECONDS)"
    held = judge_silent(node("n"), lease("n", 21), settings(), now=NOW, observed=0.0)
    assert held.state is NodeState.DOWN and held.sighting_pending


@pytest.mark.parametrize("stamped_ago, judged", [(-1.0, True), (0.5, True), (-1.5, False)])
def test_a_stamp_up_to_a_second_ahead_of_now_is_still_judged(stamped_ago, judged):
    """The Date header and the stamps are whole seconds: a stamp a second ahead is the same moment."""
    verdict = judge_silent(node("n"), lease("n", stamped_ago), settings(), now=NOW, observed=0.0)
    if judged:
        assert verdict is None
    else:
        assert verdict.state is NodeState.NOT_YET and verdict.reason == (
            "its last heartbeat is stamped 2s later than the API server's now: two clocks disagree, so it is "
            "judged neither way")


def test_what_the_pass_watched_decides_whether_the_lease_changed():
    assert judge_silent(node("n"), lease("n", 300), settings(), now=NOW, seen="1", observed=300.0).state \
        is NodeState.DOWN, "the same version as seen: unchanged"
    gone = judge_silent(node("n"), None, settings(), now=NOW, seen="1", observed=0.0)
    assert gone.state is NodeState.NOT_YET and gone.reason == "its Lease changed while this pass watched it"
    assert judge_silent(node("n"), None, settings(), now=NOW, seen="", observed=0.0) is None, "no Lease then or now"


def test_the_live_re_check_of_a_silent_node_compares_its_lease_with_the_version_the_plan_read():
    """The live re-check judges a node without a shutdown taint with judge_untainted, given the Lease version
    the plan read: a Lease written since is no candidate for a power-off, however silent its stamps."""
    written = judge_untainted(node("n"), lease("n", 300, version="2"), settings(), now=NOW, seen="1",
                              lease_observed=300.0)
    assert written.state is NodeState.NOT_YET and written.reason == "its Lease changed while this pass watched it"
    same = judge_untainted(node("n"), lease("n", 300), settings(), now=NOW, seen="1", lease_observed=300.0)
    assert same.state is NodeState.DOWN and not same.sighting_pending


def test_a_pass_times_each_silent_lease_by_how_long_it_has_seen_it_unchanged():
    """judge_nodes gives judge_silent the time this process has seen the node's Lease at its version
    (snapshot.lease_seen_for): seen unchanged for a renewal interval, a silent node may be powered off."""
    [seen_long] = judge_nodes(snapshot({"n": 25}), settings())
    assert seen_long.state is NodeState.DOWN and not seen_long.sighting_pending
    [seen_briefly] = judge_nodes(dataclasses.replace(snapshot({"n": 25}), lease_seen_for={"n": 2.0}), settings())
    assert seen_briefly.state is NodeState.DOWN and seen_briefly.sighting_pending


def test_with_fencing_a_node_without_a_lease_is_timed_by_the_default_lease_duration():
    """FENCED_MIN_NOT_READY_SECONDS=lease: the NotReady time needed is the shorter of MIN_NOT_READY_SECONDS and
    the node's Lease duration, 40 s for a node that has no Lease (fencing makes failover faster, never slower)."""
    slow, fast = (dataclasses.replace(settings(FENCED_MIN_NOT_READY_SECONDS="lease"), min_not_ready_seconds=seconds)
                  for seconds in (300, 30))
    assert min_not_ready(slow, None) == 40 and min_not_ready(slow, lease("n", 0)) == 40
    assert min_not_ready(fast, None) == 30


def test_a_held_verdict_says_when_it_may_power_off():
    verdict = judge_silent(node("n"), lease("n", 300), settings(), now=NOW, observed=2.0)
    assert verdict.reason == ("Lease unrenewed for 299s by the server's stamps, seen unchanged here for 2.0s: down "
                              "only once its BMC answers PowerState Off, and powered off only once seen unchanged "
                              "here for 12s (a renewal interval)")


def test_the_brake_counts_a_node_not_ready_or_untimeable_whatever_its_lease():
    fresh = lease("n", 1)
    assert quiet(Node("n", ready="Unknown"), fresh, settings(), now=NOW) is True
    assert quiet(node("n"), dataclasses.replace(fresh, changed_at=None), settings(), now=NOW) is True
    assert quiet(node("n"), lease("n", 20.5), settings(), now=NOW) is False
    assert quiet(node("n"), lease("n", 21), settings(), now=NOW) is True, "silent exactly REDFISH_SILENT_SECONDS"


def test_the_silent_brakes_refusal_is_the_unhealthy_fraction_brake():
    refusal = silent_brake(snapshot({"a": 3, "b": 300, "c": 300}), settings())
    assert refusal.kind is RefusalKind.UNHEALTHY_FRACTION
    assert refusal.message.endswith("the control plane may be partitioned: no BMC is asked to power anything off, "
                                    "and nothing is freed")
