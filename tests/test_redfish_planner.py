"""FENCING=redfish's planner rules, pure: when a silent node becomes a candidate for its BMC's word, what it
waits for, and the brake that counts silent Leases. No I/O: Snapshot + Settings -> Plan."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone

import pytest

from rwo_failover import settings as config
from rwo_failover.model import Lease, Node, Pod, Snapshot
from rwo_failover.planner import NodeState, judge_nodes, pod_exclusion
from rwo_failover.planner.fencing import REQUEST, fence_step
from rwo_failover.planner.redfish import WITNESS, judge_silent, silent_brake

NOW = datetime(2026, 11, 25, 12, 0, 0, tzinfo=timezone.utc)


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
    verdict = judge_silent(node("n"), lease("n", silent), settings(), NOW, observed=silent)
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
    verdict = judge_silent(node("n"), lease("n", 25), settings(), NOW, observed=observed)
    assert verdict.state is NodeState.DOWN and verdict.sighting_pending is held
    if held:
        assert verdict.changes_at == NOW + timedelta(seconds=12 - observed)
        assert "powered off only once seen unchanged here for 12s" in verdict.reason


def test_a_renewal_while_the_pass_watched_is_never_a_candidate():
    verdict = judge_silent(node("n"), lease("n", 300, version="2"), settings(), NOW, seen="1")
    assert verdict.state is NodeState.NOT_YET and "changed while this pass watched" in verdict.reason


def test_a_lease_stamped_after_the_servers_now_is_judged_neither_way():
    verdict = judge_silent(node("n"), lease("n", -30), settings(), NOW)
    assert verdict.state is NodeState.NOT_YET and "clocks disagree" in verdict.reason


def test_no_lease_no_candidate():
    assert judge_silent(node("n"), None, settings(), NOW) is None


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
