"""The storm cool-down (issue 28, NHC's stormCooldownDuration): once a brake has tripped, passes keep refusing for
STORM_COOLDOWN_SECONDS after the cluster is calm again, so a flapping partition does not release volumes at its
first calm moment. A CronJob remembers nothing, so the moments live in the control ConfigMap, written with
preconditions, on the API server's clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from helpers import skewed_pass

from rwo_failover.model import parse_time
from rwo_failover.run.exitcodes import EXIT_OK, EXIT_REFUSED
from rwo_testkit import fake_cluster as fc

NAMESPACE, NAME = "rwo-failover", "rwo-failover-control"
PARTITIONED = ("p0", "p1", "p2", "p3", "p4")


def storm(api) -> None:
    """One node proven down with a stuck pod, and a partition: 5 more of 9 nodes not Ready."""
    fc.outage(api)
    for name in PARTITIONED:
        api.add(fc.node(name, ready="Unknown", since=120))
        api.add(fc.lease(name, 160))


def calm(api) -> None:
    for name in PARTITIONED:
        api.add(fc.node(name, ready="True", since=5))
        api.add(fc.lease(name, 2))


def data(api) -> dict:
    found = api.get("configmaps", NAME, NAMESPACE)
    return (found or {}).get("data") or {}


def seconds_ago(text: str) -> float:
    return (datetime.now(UTC) - parse_time(text)).total_seconds()


def test_a_tripped_brake_is_remembered_in_the_cluster_on_the_server_s_clock(api, run_pass):
    storm(api)
    result = run_pass()
    assert result.code == EXIT_REFUSED and result.summary["brake"] == "unhealthy-fraction"
    assert abs(seconds_ago(data(api)["stormTrippedAt"])) < 5 and "stormCalmSince" not in data(api)
    assert api.get("pods", "db-0", "default") is not None


def test_the_first_calm_pass_refuses_and_says_when_it_resumes(api, run_pass):
    storm(api)
    run_pass()
    calm(api)
    result = run_pass()
    assert result.code == EXIT_REFUSED and result.summary["brake"] == "storm-cooldown"
    assert api.get("pods", "db-0", "default") is not None, "no volume released at the first calm moment"
    calm_since = data(api)["stormCalmSince"]
    assert abs(seconds_ago(calm_since)) < 5
    resumes = (parse_time(calm_since) + timedelta(seconds=300)).isoformat()
    assert resumes in result.summary["refusal"]
    [event] = [e for e in api.objects("events") if e["reason"] == "StormCooldown"]
    assert event["involvedObject"]["name"] == "dead" and resumes in event["message"]
    # Later passes keep refusing, and write nothing more to the control object.
    before = data(api)
    again = run_pass()
    assert again.code == EXIT_REFUSED and again.summary["brake"] == "storm-cooldown" and data(api) == before


def test_once_the_cool_down_has_passed_the_next_pass_frees_the_pod(api, run_pass):
    storm(api)
    run_pass()
    calm(api)
    run_pass()
    assert api.get("pods", "db-0", "default") is not None
    cm = api.get("configmaps", NAME, NAMESPACE)
    cm["data"]["stormCalmSince"] = (datetime.now(UTC) - timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    api.add(cm)
    result = run_pass(STORM_COOLDOWN_SECONDS="60")
    assert result.code == EXIT_REFUSED and result.summary["brake"] == "storm-cooldown", "calm for 30 s of 60"
    result = run_pass(STORM_COOLDOWN_SECONDS="20")
    assert result.code == EXIT_OK and result.summary["brake"] == ""
    assert api.get("pods", "db-0", "default") is None


def test_a_brake_that_trips_again_during_the_cool_down_starts_the_storm_over(api, run_pass):
    storm(api)
    run_pass()
    calm(api)
    run_pass()
    assert "stormCalmSince" in data(api)
    storm(api)
    result = run_pass()
    assert result.code == EXIT_REFUSED and result.summary["brake"] == "unhealthy-fraction"
    assert "stormCalmSince" not in data(api), "the next calm period starts from scratch"


def test_the_moment_is_written_with_the_version_it_read_and_never_over_someone_else_s(api, run_pass):
    """An operator edits the control object between our read and our write: our write gets 409 and changes
    nothing of theirs."""
    storm(api)
    run_pass()
    calm(api)

    def operator_writes_first(req):
        if req.verb == "patch" and req.resource == "configmaps" and req.name == NAME:
            cm = api.get("configmaps", NAME, NAMESPACE)
            cm["data"]["reason"] = "looking at the partition"
            api.add(cm)
        return None
    api.hooks.append(operator_writes_first)
    result = run_pass()
    [patch] = [r for r in result.requests if r.verb == "patch" and r.name == NAME]
    assert patch.body["metadata"]["resourceVersion"]
    assert data(api).get("reason") == "looking at the partition" and "stormCalmSince" not in data(api)
    assert result.code == EXIT_REFUSED and api.get("pods", "db-0", "default") is not None


def test_zero_switches_the_cool_down_off_and_writes_nothing(api, run_pass):
    storm(api)
    assert run_pass(STORM_COOLDOWN_SECONDS="0", ALLOW_UNSAFE="storm-cooldown").code == EXIT_REFUSED
    assert api.get("configmaps", NAME, NAMESPACE) is None
    calm(api)
    assert run_pass(STORM_COOLDOWN_SECONDS="0", ALLOW_UNSAFE="storm-cooldown").code == EXIT_OK
    assert api.get("pods", "db-0", "default") is None


def test_a_dry_run_writes_no_storm_moment(api, run_pass):
    storm(api)
    assert run_pass(DRY_RUN="true").code == EXIT_REFUSED
    assert api.get("configmaps", NAME, NAMESPACE) is None


def test_the_moments_are_the_api_server_s_never_the_job_s(api, kubeconfig):
    """A Job whose clock runs an hour fast writes the server's time: the cool-down is not an hour short."""
    storm(api)
    assert skewed_pass(kubeconfig, 3600).code == EXIT_REFUSED
    assert abs(seconds_ago(data(api)["stormTrippedAt"])) < 5
    calm(api)
    assert skewed_pass(kubeconfig, 3600).code == EXIT_REFUSED
    assert abs(seconds_ago(data(api)["stormCalmSince"])) < 5


def test_a_storm_during_a_fail_safe_pause_is_remembered_as_during_a_chosen_one(api, run_pass):
    """A switch that cannot be read (data.paused neither true nor false) pauses, failing safe; a brake that trips
    meanwhile is still written down, so the first calm pass after the switch is fixed keeps the cool-down."""
    storm(api)
    api.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": NAME, "namespace": NAMESPACE},
             "data": {"paused": "yes"}})
    paused = run_pass()
    assert paused.code != EXIT_OK and "failing safe" in paused.summary["paused"]
    assert "stormTrippedAt" in data(api), "the storm is remembered"
    fixed = api.get("configmaps", NAME, NAMESPACE)
    fixed["data"]["paused"] = "false"
    api.add(fixed)
    calm(api)

    result = run_pass()

    assert result.code == EXIT_REFUSED and result.summary["brake"] == "storm-cooldown"
    assert api.get("pods", "db-0", "default") is not None, "no volume released at the first calm moment"
