"""The pause switch (issue 28): data.paused=true in the control ConfigMap (rwo-failover/rwo-failover-control)
stops every write cluster-wide; a paused pass still observes and plans, says who paused and when, and exits 0
(issue 36: a pause is no failure, so a CronJob's Job succeeds; it exited 6 before). An unreadable control
object fails safe: nothing is written, the pass says why, and exits 4 (no one chose it)."""

from __future__ import annotations

import time

import pytest
from helpers import sixty_pods_freed

from rwo_failover.run.exitcodes import EXIT_OK, EXIT_UNAVAILABLE
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import ApiStatus

NAMESPACE, NAME = "rwo-failover", "rwo-failover-control"
PAUSED_AT = "2026-01-02T03:04:05Z"


def control(api, data: dict, manager: str = "kubectl-patch") -> dict:
    return api.add({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": NAME, "namespace": NAMESPACE, "managedFields": [
                        {"manager": manager, "operation": "Update", "apiVersion": "v1", "time": PAUSED_AT,
                         "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {f"f:{k}": {} for k in data}}}]},
                    "data": data})


def writes(api) -> list:
    return api.mutations()


def test_a_paused_pass_observes_and_plans_writes_nothing_and_says_who_paused_and_when(api, run_pass):
    fc.outage(api)
    control(api, {"paused": "true"})
    result = run_pass()
    assert result.code == EXIT_OK == 0, "a pause is no failure: the Job succeeds"
    assert writes(api) == [], "no taint, no delete, no Event, no record"
    assert api.get("pods", "db-0", "default") is not None
    assert [line["state"] for line in result.lines("node verdict") if line["node"] == "dead"] == ["down"]
    assert result.summary["pods_planned"] == 1, "it still plans"
    assert any("would force-delete pod" in line["message"] for line in result.logs), "dry-run-like: says what it would"
    paused = result.summary["paused"]
    assert "by kubectl-patch" in paused and "2026-01-02T03:04:05" in paused and NAME in paused


def test_the_operator_s_own_words_name_who_and_why(api, run_pass):
    fc.outage(api)
    control(api, {"paused": "true", "pausedBy": "alice (INC-1234)", "reason": "storage maintenance"})
    result = run_pass()
    assert result.code == EXIT_OK and writes(api) == []
    assert "by alice (INC-1234)" in result.summary["paused"] and "storage maintenance" in result.summary["paused"]


@pytest.mark.parametrize("words", [{"reason": "failing safe: drill"}, {"pausedBy": "failing safe team"}])
def test_an_operator_s_pause_is_chosen_whatever_its_words_say(api, run_pass, words):
    """The exit code and the paused gauge come from what kind of pause it is, never from the text an operator
    wrote (words our own fail-safe message also uses)."""
    fc.outage(api)
    control(api, {"paused": "true", **words})
    result = run_pass()
    assert result.code == EXIT_OK and writes(api) == []
    assert "failing safe" in result.summary["paused"]


def test_each_requester_s_pause_holds_until_that_requester_lifts_it(api, run_pass):
    """One pause request per requester (data.pause.<requester>: its reason), as NodeHealthCheck keeps them: a
    pass is paused while any stands, says every one, and one team lifting its own leaves the other's in force."""
    fc.outage(api)
    control(api, {"pause.storage-team": "array firmware upgrade", "pause.db-team": "INC-42 restore"})
    both = run_pass()
    assert both.code == EXIT_OK and writes(api) == []
    assert "storage-team" in both.summary["paused"] and "INC-42 restore" in both.summary["paused"]
    found = api.get("configmaps", NAME, NAMESPACE)
    del found["data"]["pause.storage-team"]  # the storage team is done
    api.add(found)

    one = run_pass()

    assert one.code == EXIT_OK and writes(api) == [] and api.get("pods", "db-0", "default") is not None
    assert "db-team" in one.summary["paused"] and "storage-team" not in one.summary["paused"]
    found = api.get("configmaps", NAME, NAMESPACE)
    del found["data"]["pause.db-team"]
    api.add(found)
    assert run_pass().summary["paused"] == "" and api.get("pods", "db-0", "default") is None


def test_a_pause_request_with_a_name_no_requester_has_fails_safe(api, run_pass):
    fc.outage(api)
    control(api, {"pause.": "who?"})
    result = run_pass()
    assert result.code == EXIT_UNAVAILABLE and writes(api) == []
    assert "pause." in result.summary["paused"] and "failing safe" in result.summary["paused"]


def test_paused_false_or_no_control_object_changes_nothing(api, run_pass):
    fc.outage(api)
    control(api, {"paused": "false"})
    result = run_pass()
    assert result.code == EXIT_OK and result.summary["paused"] == ""
    assert api.get("pods", "db-0", "default") is None


def test_no_control_object_is_not_paused(api, run_pass):
    fc.outage(api)
    result = run_pass()
    assert result.code == EXIT_OK and result.summary["paused"] == ""
    assert api.get("pods", "db-0", "default") is None


def test_a_value_that_is_neither_true_nor_false_fails_safe(api, run_pass):
    fc.outage(api)
    control(api, {"paused": "yes please"})
    result = run_pass()
    assert result.code == EXIT_UNAVAILABLE and writes(api) == []
    assert "neither true nor false" in result.summary["paused"] and "failing safe" in result.summary["paused"]


def test_a_control_object_that_cannot_be_read_fails_safe(api, run_pass):
    """The API server errs on the control object alone (every retry): nothing is written, with the reason."""
    fc.outage(api)

    def broken(req):
        if req.resource == "configmaps" and "metadata.name=" + NAME in req.query.get("fieldSelector", ""):
            raise ApiStatus(500, "InternalError", "etcd is unwell")
        return None
    api.hooks.append(broken)
    result = run_pass(API_MAX_ATTEMPTS="1")
    assert result.code == EXIT_UNAVAILABLE and writes(api) == []
    assert "cannot be read" in result.summary["paused"] and "failing safe" in result.summary["paused"]


def test_rbac_that_denies_the_read_fails_safe(api, run_pass):
    """Trimmed RBAC, or a new version applied before its rbac.yaml: refused, the pass says which verb."""
    fc.outage(api)

    def forbidden(req):
        if req.resource == "configmaps" and "metadata.name=" + NAME in req.query.get("fieldSelector", ""):
            raise ApiStatus(403, "Forbidden", 'configmaps is forbidden: cannot list resource "configmaps"')
        return None
    api.hooks.append(forbidden)
    result = run_pass()
    assert writes(api) == [] and api.get("pods", "db-0", "default") is not None
    assert result.code == EXIT_UNAVAILABLE and "list" in result.summary["paused"]


def test_a_pause_set_after_the_plan_stops_the_first_write(api, run_pass):
    """The switch is read again, live, before the pass's first write: set while the pass re-checks the node,
    nothing is written at all."""
    fc.outage(api)

    def pause_on_recheck(req):
        if req.verb == "get" and req.resource == "nodes" and req.name == "dead" and api.get("configmaps", NAME,
                                                                                             NAMESPACE) is None:
            control(api, {"paused": "true", "pausedBy": "bob"})
        return None
    api.hooks.append(pause_on_recheck)
    result = run_pass()
    assert writes(api) == [] and api.get("pods", "db-0", "default") is not None
    assert result.code == EXIT_OK and "by bob" in result.summary["paused"]


def test_continuous_mode_honours_the_switch_within_a_second_and_reports_it(api, kubeconfig):
    """The loop watches the control object: a pause is a pass at once, the metric and /readyz's body say so, an
    outage meanwhile is left alone, and resuming frees it at once."""
    import urllib.request

    from test_watch import running_loop, shut_down, stop, wait_until

    from rwo_testkit.control_plane import free_port

    port = free_port()

    def get(path: str) -> str:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as answer:
                return answer.read().decode()
        except OSError:
            return ""
    proc = running_loop(api, kubeconfig, METRICS_PORT=str(port))
    try:
        assert "rwo_failover_paused 0.0" in get("/metrics")
        control(api, {"paused": "true", "pausedBy": "carol"})
        wait_until("the paused gauge", lambda: "rwo_failover_paused 1.0" in get("/metrics"), timeout=1.5)
        assert "paused" in get("/readyz") and "by carol" in get("/readyz")
        shut_down(api)
        time.sleep(2)
        assert api.get("pods", "db-0", "default") is not None and not writes(api)
        control(api, {"paused": "false"})
        wait_until("the pod freed", lambda: api.get("pods", "db-0", "default") is None, timeout=3)
        wait_until("/readyz without the pause", lambda: get("/readyz") == "ok\n", timeout=3)
    finally:
        logs = stop(proc)
    paused = [line for line in logs if line["message"] == "pass finished" and line["paused"]]
    assert paused and all("by carol" in line["paused"] and line["exit_code"] == EXIT_OK for line in paused)


def test_continuous_mode_stops_a_pass_in_flight_at_the_next_write_once_the_watch_sees_the_pause(api, kubeconfig):
    """Paused while a pass force-deletes the first of two pods: the leader's watched copy stops the next write."""
    from test_watch import running_loop, stop, wait_until

    proc = running_loop(api, kubeconfig)
    try:
        def pause_on_first_delete(req):
            if req.verb == "delete" and req.resource == "pods" and api.get("configmaps", NAME, NAMESPACE) is None:
                control(api, {"paused": "true", "pausedBy": "dave"})
                time.sleep(1)  # the watch event reaches the loop before this delete's answer does
            return None
        api.hooks.append(pause_on_first_delete)
        for name in ("db-0", "db-1"):
            fc.add_volume(api, f"data-{name}", attached_to="dead")
            api.add(fc.pod(name, "dead", claims=[f"data-{name}"], terminating=True))
        node = api.get("nodes", "dead")  # NotReady since before the loop started: the cloud taints it now
        node["spec"]["taints"] = node["spec"].get("taints", []) + [fc.SHUTDOWN]
        api.add(node)
        wait_until("the pause", lambda: api.get("configmaps", NAME, NAMESPACE) is not None, timeout=10)
        time.sleep(2)
    finally:
        logs = stop(proc)
    deleted = [r for r in api.requests if r.verb == "delete" and r.resource in ("pods", "volumeattachments")]
    assert len(deleted) == 1, "only the delete already sent"
    stopped = [line for line in logs if line["message"] == "pass finished" and "by dave" in line["paused"]]
    assert stopped and stopped[0]["exit_code"] == EXIT_OK


def test_a_paused_cronjob_pass_pushes_the_paused_gauge_and_its_result(api, run_pass, tmp_path):
    from test_monitoring import gauge, groups, pushgateway, series

    gateway, url = pushgateway(tmp_path)
    try:
        fc.outage(api)
        control(api, {"paused": "true"})
        assert run_pass(PUSHGATEWAY_URL=url).code == EXIT_OK
        [paused] = groups(url)
        api.remove("configmaps", NAME, NAMESPACE)
        assert run_pass(PUSHGATEWAY_URL=url).code == EXIT_OK
        [resumed] = groups(url)
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
    assert gauge(paused, "rwo_failover_paused") == 1 and gauge(resumed, "rwo_failover_paused") == 0
    assert series(paused, "rwo_failover_passes_total")[(("result", "paused"),)] == 1
    assert series(paused, "rwo_failover_passes_total")[(("result", "ok"),)] == 0, "exit 0, but no success"
    assert "rwo_failover_last_success_timestamp_seconds" not in paused, "a paused pass frees nothing"
    assert gauge(resumed, "rwo_failover_last_success_timestamp_seconds") > 0


def test_an_unreadable_switch_is_a_failure_not_a_pause_for_the_metrics(api, run_pass, tmp_path):
    """No one chose it: exit 4, result unavailable, rwo_failover_paused 0, so the failure alerts are not held back
    (RwoFailoverPassesFailing and RwoFailoverNoSuccessfulPass hold back only while rwo_failover_paused is 1)."""
    from test_monitoring import gauge, groups, pushgateway, series

    gateway, url = pushgateway(tmp_path)
    try:
        fc.outage(api)
        control(api, {"paused": "maybe"})
        result = run_pass(PUSHGATEWAY_URL=url)
        [group] = groups(url)
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
    assert result.code == EXIT_UNAVAILABLE and writes(api) == [] and "failing safe" in result.summary["paused"]
    assert gauge(group, "rwo_failover_paused") == 0
    assert series(group, "rwo_failover_passes_total")[(("result", "unavailable"),)] == 1
    assert series(group, "rwo_failover_passes_total")[(("result", "paused"),)] == 0


def control_reads(api) -> list:
    return [r for r in api.requests if r.verb == "list" and r.resource == "configmaps"
            and r.query.get("fieldSelector") == f"metadata.name={NAME}"]


def test_the_switch_is_read_a_handful_of_times_a_pass_not_once_per_write(api, run_pass):
    """60 pods on a dead node: 60 force-deletes and more, in a second or so. The switch is
    read when the pass starts, before its first write, and then at most once per PAUSE_READ_SECONDS of writing
    (it was read before every destructive write: 617 ConfigMap lists in one run at 5,000 nodes)."""
    result, took = sixty_pods_freed(api, run_pass)
    assert result.code == EXIT_OK and not api.objects("pods")
    assert len(control_reads(api)) <= 2 + int(took), (len(control_reads(api)), took)


def test_a_pause_set_mid_pass_stops_every_destructive_write_that_starts_a_second_after_it(api, run_pass):
    """The bound docs/operations.md states: writes slowed to one every 0.3 s (each pod delete answered late), a
    pause set at the first pod delete; no destructive write starts more than PAUSE_READ_SECONDS after it."""
    fc.outage(api, pods=[f"db-{i}" for i in range(10)])
    paused_at = []

    def slow_then_pause(req):
        if req.verb == "delete" and req.resource == "pods":
            if not paused_at:
                control(api, {"paused": "true", "pausedBy": "grace"})
                paused_at.append(time.monotonic())
            time.sleep(0.3)
        return None
    api.hooks.append(slow_then_pause)
    result = run_pass()
    deletes = [r for r in api.requests if r.verb == "delete" and r.resource in ("pods", "volumeattachments")]
    assert paused_at and 1 <= len(deletes) <= 1 + int(1.0 / 0.3) + 1, len(deletes)
    assert len(api.objects("pods")) >= 10 - len(deletes), "what was not sent still stands"
    assert "by grace" in result.summary["paused"] and result.code == EXIT_OK
    assert result.summary["not_attempted"] >= 1
