"""One test per injected fault: the retried outcome, the delays asked for, the final state, the exit code.

The RELIABILITY table at the bottom is the README's "Reliability" table; tests/test_docs.py keeps them equal.
"""

from __future__ import annotations

import pytest
from helpers import attached, detached

from rwo_failover.run.exitcodes import EXIT_FAILED, EXIT_FORBIDDEN, EXIT_OK, EXIT_UNAVAILABLE
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import Fault
from rwo_testkit.managed_fields import bulky, hostile_entry


@pytest.fixture
def broken(api):
    """Three healthy nodes and one dead node holding two stuck StatefulSet pods with attached RWO volumes."""
    fc.outage(api, pods=("db-0", "db-1"))
    return api


def attempts(result, verb: str, resource: str, name: str = "") -> list[int]:
    return [r.status for r in result.requests
            if r.verb == verb and r.resource == resource and (not name or r.name == name)]


def all_released(api) -> bool:
    return api.objects("pods") == [] and detached(api) == []


def test_429_with_retry_after_is_honoured(broken, run_pass):
    broken.inject(Fault("status", verb="list", resource="nodes", status=429, retry_after="2", first=2))
    result = run_pass()
    assert attempts(result, "list", "nodes") == [429, 429, 200]
    assert result.sleeps == [2.0, 2.0], "the delay asked for is exactly Retry-After"
    assert all_released(broken) and result.code == EXIT_OK
    assert result.summary["api_attempts"] == len(result.requests)


def test_retry_after_beyond_the_pass_deadline_stops_at_once(broken, run_pass):
    broken.inject(Fault("status", verb="list", resource="nodes", status=429, retry_after="25"))
    # MIN_NOT_READY_SECONDS=0: no wait of its own, so start-up accepts a one-shot run this short
    result = run_pass(PASS_TIMEOUT_SECONDS="5", REQUEST_TIMEOUT_SECONDS="2", MIN_NOT_READY_SECONDS="0",
                      ALLOW_UNSAFE="min-not-ready")
    assert attempts(result, "list", "nodes") == [429] and result.sleeps == []
    assert result.code == EXIT_UNAVAILABLE
    [error] = result.lines("cannot read the cluster; nothing was changed")
    assert "PASS_TIMEOUT_SECONDS" in error["error"]
    assert len(broken.objects("pods")) == 2


@pytest.mark.parametrize("status", [500, 503, 504])
def test_transient_5xx_on_delete_is_retried_with_backoff(broken, run_pass, status):
    broken.inject(Fault("status", verb="delete", resource="pods", name="db-0", status=status, first=2))
    result = run_pass()
    assert attempts(result, "delete", "pods", "db-0") == [status, status, 200]
    assert len(result.sleeps) == 2 and all(0 < s <= 5.0 for s in result.sleeps)
    assert all_released(broken) and result.code == EXIT_OK


def test_connection_reset_mid_response_is_retried(broken, run_pass):
    broken.inject(Fault("reset", verb="get", resource="persistentvolumeclaims", first=1))
    result = run_pass()
    assert len(attempts(result, "get", "persistentvolumeclaims")) == 3, "two claims, one read twice"
    assert [r.fault for r in result.requests if r.fault] == ["reset"]
    assert all_released(broken) and result.code == EXIT_OK


def test_read_timeout_is_retried(broken, run_pass):
    broken.inject(Fault("timeout", verb="get", resource="nodes", delay=1.0, first=1))
    result = run_pass(REQUEST_TIMEOUT_SECONDS="0.3")
    # The first live re-check is read twice (the timeout, then the retry); every later one once.
    faults = [r.fault for r in result.requests if (r.verb, r.resource) == ("get", "nodes")]
    assert faults[:2] == ["timeout", ""] and set(faults[2:]) <= {""}
    retried = result.lines("retrying API call")
    assert retried and "Timeout" in retried[0]["error"]
    assert all_released(broken) and result.code == EXIT_OK


def test_truncated_json_body_is_retried(broken, run_pass):
    broken.inject(Fault("truncate", verb="list", resource="pods", first=1))
    result = run_pass()
    assert attempts(result, "list", "pods") == [200, 200]
    assert "JSONDecodeError" in result.lines("retrying API call")[0]["error"]
    assert all_released(broken) and result.code == EXIT_OK


def paged_nodes(api) -> None:
    """A continue token exists only in a paginated list: kube-apiserver answers the pass's first list (at
    resourceVersion 0) whole, whatever its limit. Nodes padded to 1.4 MB each make that answer over 16 MiB, so
    the pass lists them again without a resourceVersion, in pages (kube/lists.py)."""
    for i in range(9):
        fc.live_node(api, f"big-{i}")
    padding = hostile_entry(bulky(1_400_000), manager="node-labeller")
    for node in api.objects("nodes"):
        node["metadata"]["managedFields"] = node["metadata"].get("managedFields", []) + [padding]
        api.add(node)


def node_lists(result) -> list[tuple[int, str]]:
    """Each node list request: its status and how it was asked (at version 0, a first page, or a continue)."""
    return [(r.status, "0" if r.query.get("resourceVersion") == "0" else "continue" if "continue" in r.query
             else "first") for r in result.requests if r.verb == "list" and r.resource == "nodes"
            and r.query.get("limit") != "1"]


def test_expired_continue_token_restarts_the_list(broken, run_pass):
    paged_nodes(broken)
    broken.inject(Fault("expired-continue", verb="list", resource="nodes", first=1))
    result = run_pass(PAGE_SIZE="5")
    pages = node_lists(result)
    # A pass's lists are consistent (issue 36): paginated from the first page, never at version 0.
    assert pages[:3] == [(200, "first"), (410, "continue"), (200, "first")], "restarted from the first page"
    assert all(how != "0" for _, how in pages)
    assert result.lines("list continue token expired; restarting the list")
    assert all_released(broken) and result.code == EXIT_OK


def test_persistent_expired_continue_gives_up_after_bounded_restarts(broken, run_pass):
    paged_nodes(broken)
    broken.inject(Fault("expired-continue", verb="list", resource="nodes"))
    result = run_pass(PAGE_SIZE="5")
    assert node_lists(result) == [(200, "first"), (410, "continue")] * 4, "the first page and its 410, four times"
    assert result.code == EXIT_UNAVAILABLE and len(broken.objects("pods")) == 2


def test_409_on_delete_precondition_skips_only_that_pod(broken, run_pass):
    broken.inject(Fault("status", verb="delete", resource="pods", name="db-0", status=409))
    result = run_pass()
    assert attempts(result, "delete", "pods", "db-0") == [409], "a conflict is an answer, not retried"
    assert [p["metadata"]["name"] for p in broken.objects("pods")] == ["db-0"]
    left = [va["spec"]["source"]["persistentVolumeName"] for va in attached(broken)]
    assert left == ["pv-default-data-db-0"]
    assert result.summary["pods_replaced"] == 1 and result.code == EXIT_OK


def test_403_on_one_resource_names_it_and_exits_5(broken, run_pass):
    broken.deny("delete", "volumeattachments")
    result = run_pass()
    assert broken.objects("pods") == [] and len(attached(broken)) == 2
    errors = [line["message"] for line in result.logs if line["level"] == "ERROR"]
    assert sum("RBAC denies verb 'delete' on volumeattachments" in e for e in errors) == 2
    assert result.code == EXIT_FORBIDDEN and result.summary["failures"] == 2


def test_persistent_5xx_on_one_pod_does_not_stop_the_others_and_exits_1(broken, run_pass):
    broken.inject(Fault("status", verb="delete", resource="pods", name="db-0", status=503))
    result = run_pass(API_MAX_ATTEMPTS="3")
    assert attempts(result, "delete", "pods", "db-0") == [503, 503, 503]
    assert attempts(result, "delete", "pods", "db-1") == [200]
    assert [p["metadata"]["name"] for p in broken.objects("pods")] == ["db-0"]
    left = [va["spec"]["source"]["persistentVolumeName"] for va in attached(broken)]
    assert left == ["pv-default-data-db-0"], "db-0's volume waits for db-0; db-1's is released"
    assert result.code == EXIT_FAILED
    assert result.summary["failures"] == 1 and result.summary["pods_deleted"] == 1


def test_persistent_503_while_reading_exits_4_after_the_attempt_bound(broken, run_pass):
    broken.inject(Fault("status", verb="list", resource="nodes", status=503))
    result = run_pass(API_MAX_ATTEMPTS="4")
    assert attempts(result, "list", "nodes") == [503] * 4
    assert result.code == EXIT_UNAVAILABLE and result.summary["exit_code"] == EXIT_UNAVAILABLE
    assert broken.mutations() == []


def test_fraction_faults_are_seeded_and_reproducible(api):
    def fired(seed: int) -> list[int]:
        api.reset()
        api.random.seed(seed)
        fault = api.inject(Fault("status", verb="get", resource="nodes", fraction=0.5))
        return [int(api._fault_for(type("R", (), {"verb": "get", "resource": "nodes", "name": "", "query": {}})())
                    is not None) for _ in range(20)] + [fault.fired]
    assert fired(7) == fired(7) and fired(7) != fired(8)


# The README's "Reliability" table: fault or input, and what a pass does. Kept equal by tests/test_docs.py.
RELIABILITY = [
    ("429 with `Retry-After`", "Waits exactly `Retry-After` (capped at 30 s), retries, and finishes; exit 0."),
    ("`Retry-After` past the pass deadline", "Stops at once without sleeping; exit 4, naming `PASS_TIMEOUT_SECONDS`."),
    ("500, 503, 504 (transient)", "Exponential backoff with jitter, up to `API_MAX_ATTEMPTS`; then finishes; exit 0."),
    ("Connection reset mid-response", "Retried like a 5xx; exit 0."),
    ("Read timeout (`REQUEST_TIMEOUT_SECONDS`)", "Retried like a 5xx; exit 0."),
    ("Truncated JSON body", "Retried like a 5xx; exit 0."),
    ("410 on a list `continue` token", "Restarts the list from the first page, at most 3 times; then exit 4."),
    ("409 on the delete precondition", "Not retried: the pod was replaced. Left alone with its volume; exit 0."),
    ("403 on one resource", "That action fails, the rest goes on; the log names the verb; exit 5."),
    ("Persistent 5xx on one pod's delete", "Other pods are still handled; that pod's volume stays; exit 1."),
    ("Persistent 5xx while reading", "Nothing is changed; exit 4 after the attempt bound."),
    ("`/version` unreadable or not understood (`OUT_OF_SERVICE_TAINT=auto`)",
     "Goes on without the out-of-service taint, with a warning; pods and attachments are still handled; exit 0."),
    ("Bad value for any setting (empty, wrong type, out of range, bad taint or selector, unknown log format, "
     "fraction above 1, contradictory namespaces)", "Exit 2 before any API call, one line naming the variable."),
    ("Missing, unreadable or malformed kubeconfig; unknown context", "Exit 2, naming the path or the context."),
    ("Unreachable API server", "Exit 4 after `API_MAX_ATTEMPTS` attempts, naming the call."),
    ("Two passes at once", "Both finish; the loser's deletes get 404, which counts as done; exit 0 for both."),
    ("200 seeded random fault schedules (chaos)", "Invariants hold on every run; a clean second pass completes."),
]
