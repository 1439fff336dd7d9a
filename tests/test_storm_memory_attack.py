"""Attacks on the storm cool-down's memory (issue 28): a storm moment that a pass could not record must not let
the next calm pass act at its first calm moment, which is what the cool-down exists to prevent."""

from __future__ import annotations

from datetime import UTC

from test_storm_cooldown import NAME, NAMESPACE, calm, data, storm

from rwo_failover.run.exitcodes import EXIT_REFUSED


def test_a_trip_whose_write_lost_a_race_is_still_remembered(api, run_pass):
    """An operator creates the control ConfigMap (to leave a note, paused=false) between our read and our
    create of stormTrippedAt: our create gets 409. The next pass is calm, and must still cool down."""
    def operator_creates_first(req):
        if req.verb == "create" and req.resource == "configmaps" and (req.body or {}).get("metadata", {}).get(
                "name") == NAME and api.get("configmaps", NAME, NAMESPACE) is None:
            api.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": NAME, "namespace": NAMESPACE},
                     "data": {"paused": "false", "reason": "watching the partition"}})
        return None
    api.hooks.append(operator_creates_first)
    storm(api)
    first = run_pass()
    assert first.code == EXIT_REFUSED and first.summary["brake"] == "unhealthy-fraction"
    assert data(api).get("reason") == "watching the partition", "the operator's note is kept"
    calm(api)
    result = run_pass()
    assert api.get("pods", "db-0", "default") is not None, "a volume was released at the first calm moment"
    assert result.code == EXIT_REFUSED and result.summary["brake"] == "storm-cooldown"


def test_continuous_mode_judges_the_cool_down_from_the_live_object_not_a_lagging_watch(api, kubeconfig):
    """HA mode: the watch of the control ConfigMap runs a few seconds behind (a busy API server). A pass trips
    the brake and writes stormTrippedAt; the partition heals a moment later. The next pass must not judge the
    storm from the watched copy, which has not seen that write yet, and release the volume."""
    import time

    from test_watch import running_loop, stop, wait_until

    from rwo_testkit.fake_apiserver import Fault

    api.inject(Fault("watch-lag", resource="configmaps", delay=4))
    proc = running_loop(api, kubeconfig)
    try:
        storm(api)
        wait_until("the trip recorded", lambda: "stormTrippedAt" in data(api), timeout=10)
        calm(api)
        time.sleep(2.5)  # calm passes run at once; the watch delivers the trip only at 4 s
        kept = api.get("pods", "db-0", "default") is not None
    finally:
        logs = stop(proc)
    passes = [(line["exit_code"], line.get("brake")) for line in logs if line["message"] == "pass finished"]
    assert kept, f"a volume was released at the first calm moment; passes: {passes}"
    assert (EXIT_REFUSED, "storm-cooldown") in passes


def test_start_up_says_the_cool_down_is_off_without_its_namespace(api, run_pass):
    """RECOVERY_NAMESPACE missing (a run by hand against a cluster without the manifests): no storm moment can be
    kept, so after a brake the first calm pass acts. Start-up must name that among what is off, not only
    recovery confirmation."""
    from test_missing_install import OFF

    api.missing_namespaces.add(NAMESPACE)
    storm(api)
    [off] = run_pass().lines(OFF)
    assert off["setting"] == "RECOVERY_NAMESPACE=rwo-failover"
    assert "storm cool-down" in off["off"] and "STORM_COOLDOWN_SECONDS" in off["off"]


def test_a_deposed_leader_writes_no_storm_moment_and_no_retry(api, tmp_path):
    """Partitions and elections: a leader that lost its Lease mid-pass (the guard names it) neither writes the trip
    nor, after a first attempt that lost a race, the re-read retry."""
    from datetime import datetime

    from rwo_failover import settings as config
    from rwo_failover.act.control import record_storm
    from rwo_failover.act.outcome import Outcome
    from rwo_failover.act.writer import Result, Writer
    from rwo_failover.kube import Api, load_api_client
    from rwo_failover.model.control import TRIPPED_AT
    from rwo_failover.planner import StormMark

    _args, settings = config.load([], {"KUBECONFIG": api.write_kubeconfig(str(tmp_path / "kc"))})
    client = Api(load_api_client(settings), settings, sleep=lambda _s: None)
    lost: list[str] = []
    writer = Writer(client, False, Outcome(), guard=lambda: lost[0] if lost else None)
    api.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": NAME, "namespace": NAMESPACE},
             "data": {"reason": "an operator's note"}})

    def depose_on_first_write(req):
        if req.could_change and req.resource == "configmaps":
            lost.append("leadership lost")
        return None
    api.hooks.append(depose_on_first_write)
    mark = StormMark(TRIPPED_AT, datetime.now(UTC), "1")  # a stale version: 409, then a re-read
    assert record_storm(writer, settings, mark) is Result.NOT_ATTEMPTED
    assert [r.verb for r in api.mutations() if r.resource == "configmaps"] == ["patch"], "one attempt, no retry"
    assert "stormTrippedAt" not in data(api)
    lost.clear()
    assert record_storm(Writer(client, True, Outcome()), settings, mark) is Result.WOULD, "a dry-run replica"
    assert len([r for r in api.mutations() if r.resource == "configmaps"]) == 1
