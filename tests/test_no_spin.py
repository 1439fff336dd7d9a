"""Issue 25, items 3-5: nothing spins, whatever the watch traffic. Each test measures CPU time over a bounded
window (or counts requests) and asserts a generous bound; the figures at scale are bench/steady.py's."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from test_watch import settings_for

from rwo_failover.kube import Api, load_api_client
from rwo_failover.kube.backoff import Backoff
from rwo_failover.kube.reflector import Reflector
from rwo_failover.kube.sources import NODES
from rwo_failover.run.loop import MIN_GAP_SECONDS, StopFlag, Trigger, _wait_for_reason
from rwo_failover.run.metrics import Metrics
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import Fault


def test_the_loop_sleeps_while_a_burst_settles_and_between_passes():
    """A taint flapping every 0.15 s never lets a burst go quiet for DEBOUNCE_SECONDS: the loop waited for it,
    and for MIN_GAP_SECONDS after each pass, by spinning (95% of a core). Now its thread sleeps."""
    trigger, flag, done = Trigger(), StopFlag(), threading.Event()

    def flap() -> None:
        while not done.is_set():
            trigger.fire("nodes a modified")
            time.sleep(0.15)
    threading.Thread(target=flap, daemon=True).start()
    began, cpu, passes = time.monotonic(), time.thread_time(), []
    last = time.monotonic()
    try:
        while time.monotonic() - began < 4:
            passes.append(_wait_for_reason(flag, trigger, last, wake=None, interval=300.0, elector=None))
            trigger.take()
            assert time.monotonic() - last >= MIN_GAP_SECONDS
            last = time.monotonic()
    finally:
        done.set()
    spent = time.thread_time() - cpu
    assert spent < 0.2, f"the waiting thread used {spent:.2f}s of CPU in 4 s"
    assert set(passes) == {"change"} and 2 <= len(passes) <= 8, passes


# --- one back-off gate round list-and-watch (items 3 and 4), on the fixture API server -------------------

@pytest.fixture
def started_reflector(api, kubeconfig):
    made = []

    def make(**env: str) -> tuple[Reflector, Metrics]:
        settings = settings_for(kubeconfig, **env)
        api_client = load_api_client(settings)
        metrics = Metrics()
        found = Reflector(NODES, lambda: Api(api_client, settings), settings, on_change=lambda _why: None,
                          metrics=metrics)
        made.append(found)
        found.start()
        found.current(found.new_api())
        return found, metrics
    yield make
    for found in made:
        found.stop()


def requests_for(api, verb: str, since: float) -> list:
    return [r for r in api.requests if r.verb == verb and r.resource == "nodes" and r.at >= since]


def failing_lines(caplog) -> list:
    return [r for r in caplog.records if r.getMessage() == "watch failing; backing off"]


def test_watches_the_server_closes_at_once_are_reopened_behind_the_back_off(api, started_reflector, caplog):
    """An empty 200 to every watch (a server shutting down behind a load balancer): reopened about 1,000
    times a second before, with no log line. Now 0.8 s doubling, jittered; one warning for the whole run."""
    caplog.set_level(logging.INFO, logger="rwo_failover")
    fc.live_node(api, "a")
    api.inject(Fault("watch-empty", resource="nodes"))
    began = time.monotonic()
    found, metrics = started_reflector()
    time.sleep(4)
    opened = requests_for(api, "watch", began)
    assert 2 <= len(opened) <= 5, f"{len(opened)} watches in 4 s"
    assert (metrics.registry.get_sample_value("rwo_failover_watch_restarts_total",
                                              {"resource": "nodes", "reason": "short"}) or 0) >= 2
    assert len(failing_lines(caplog)) == 1, "logged once per change of state, not once per retry"


def test_a_410_storm_relists_behind_the_back_off(api, started_reflector, caplog):
    """Every watch answers 410 Gone: list, watch, 410, list... 78 full lists a second before."""
    caplog.set_level(logging.INFO, logger="rwo_failover")
    fc.live_node(api, "a")
    api.inject(Fault("watch-gone", resource="nodes"))
    began = time.monotonic()
    started_reflector()
    time.sleep(4)
    lists = requests_for(api, "list", began)
    assert 2 <= len(lists) <= 5, f"{len(lists)} node lists in 4 s"
    assert len(failing_lines(caplog)) == 1


def test_a_watch_that_works_again_is_followed_at_once(api, started_reflector, caplog):
    """Three empty answers, then a working watch: the change after them arrives, one warning in all."""
    caplog.set_level(logging.INFO, logger="rwo_failover")
    api.bookmark_seconds = 1
    fc.live_node(api, "a")
    fault = api.inject(Fault("watch-empty", resource="nodes", first=3))
    found, _metrics = started_reflector()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and len(requests_for(api, "watch", 0)) < 4:
        time.sleep(0.05)
    assert fault.fired == 3 and len(requests_for(api, "watch", 0)) == 4
    fc.dead_node(api, "b")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and "b" not in found.items:
        time.sleep(0.05)
    assert "b" in found.items
    assert len(failing_lines(caplog)) == 1


def test_the_gate_doubles_with_jitter_to_its_cap_and_a_healthy_watch_resets_it():
    low, high = Backoff(rand=lambda: 0.0), Backoff(rand=lambda: 0.999)
    waits = [low.failed() for _ in range(8)]
    assert waits[:3] == [0.8, 1.6, 3.2] and waits[-1] == 30.0
    assert 1.19 < high.failed() < 1.2, "jitter: up to half as long again"
    assert low.healthy() == 8 and low.failed() == 0.8
