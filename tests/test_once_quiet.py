"""One pass (a CronJob's) watches a node whose kubelet went quiet, for the shutdown taint NotReady brings (issue 29).

A CronJob passes once a minute and the cloud's taint comes only at NotReady: a pass a few seconds before it
found nothing to wait for, and the node waited for the next Job. Now a first pass with nothing due lists the
node Leases; nodes that missed a renewal are read once a second within ONCE_WAIT_SECONDS, and once one carries
a shutdown taint the run passes again, judging everything afresh. These run the real reconcile.py as a
process against the fixture API server, which a test thread changes while the run waits.
"""

from __future__ import annotations

import threading
import time

from helpers import attached, detached, stuck, tainted_node
from test_once_wait import one_pass

from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import Fault

QUIET_MESSAGE = "kubelets went quiet: watching them for a shutdown taint, then passing again"


def quiet_node(api, name: str = "dead", lease_renewed_ago: float = 45) -> None:
    """A node still Ready and untainted whose kubelet stopped renewing its Lease `lease_renewed_ago` s ago (the
    renew interval of a 40 s Lease is 10 s), holding a StatefulSet pod with an attached RWO claim."""
    api.add(fc.node(name, ready="True", since=86400))
    api.add(fc.lease(name, lease_renewed_ago, 40))
    stuck(api, name)


def later(seconds: float, change) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(seconds), change()), daemon=True)
    thread.start()
    return thread


def lease_lists(api) -> list:
    return [r for r in api.requests if r.verb == "list" and r.resource == "leases"]


def test_a_quiet_node_that_gets_its_shutdown_taint_is_freed_in_the_same_run(api, kubeconfig):
    for i in range(3):
        fc.live_node(api, f"w{i}")
    quiet_node(api)
    # NotReady and the cloud's taint come 4 s into the run: the Lease has been silent far past its 40 s, so the node
    # is proven down MIN_NOT_READY_SECONDS (3 here) after the node controller's write.
    change = later(4, lambda: tainted_node(api, "dead", not_ready_for=0, lease_renewed_ago=49))

    code, logs, took = one_pass(kubeconfig, MIN_NOT_READY_SECONDS="3")
    change.join()

    assert code == EXIT_OK
    assert detached(api) == [], "freed in the same run"
    assert [p["metadata"]["name"] for p in api.objects("pods")] == [], "the stuck pod is gone"
    quiet = [line for line in logs if line["message"] == QUIET_MESSAGE]
    assert len(quiet) == 1 and quiet[0]["nodes"] == ["dead"]
    assert [line["node"] for line in logs if line["message"].startswith("a quiet node carries")] == ["dead"]
    passes = [line for line in logs if line["message"] == "pass finished"]
    assert passes[-1]["pods_deleted"] == 1 and len(passes) == 3, "nothing; not yet (due in 3 s); freed"
    assert took < 40


def test_without_a_quiet_lease_the_run_ends_after_one_pass(api, kubeconfig):
    for i in range(3):
        fc.live_node(api, f"w{i}")

    code, logs, took = one_pass(kubeconfig)

    assert code == EXIT_OK and took < 15
    assert [line["message"] for line in logs].count("pass finished") == 1
    assert not [line for line in logs if line["message"] == QUIET_MESSAGE]
    assert len(lease_lists(api)) == 1, "one list of the Leases, no more"


def test_a_renewal_ends_the_wait_and_nothing_is_touched(api, kubeconfig):
    fc.live_node(api, "w0")
    quiet_node(api)
    # The kubelet was only slow: it renews 3 s into the run, and the node is never tainted.
    later(3, lambda: api.add(fc.lease("dead", 0, 40)))

    code, logs, took = one_pass(kubeconfig)

    assert code == EXIT_OK and len(api.objects("pods")) == 1 and len(attached(api)) == 1
    assert [line for line in logs if line["message"] == QUIET_MESSAGE]
    assert [line["message"] for line in logs].count("pass finished") == 1
    assert took < 15, "the wait ended at the renewal, not at its budget (about 24 s)"


def test_a_dry_run_and_once_wait_seconds_0_read_no_lease(api, kubeconfig):
    quiet_node(api)

    for env in ({"DRY_RUN": "true"}, {"ONCE_WAIT_SECONDS": "0"}):
        code, logs, took = one_pass(kubeconfig, **env)
        assert code == EXIT_OK and took < 15, env
        assert not lease_lists(api), env
        assert not [line for line in logs if line["message"] == QUIET_MESSAGE], env


def test_more_quiet_nodes_than_max_nodes_per_pass_are_not_waited_for(api, kubeconfig):
    """A partition, or the API server's own trouble, silences many Leases at once: no pass could act on them."""
    for i in range(4):
        fc.live_node(api, f"w{i}")
    for i in range(3):
        quiet_node(api, f"q{i}")

    code, logs, took = one_pass(kubeconfig, MAX_NODES_PER_PASS="2")

    assert code == EXIT_OK and took < 15
    assert [line["quiet_nodes"] for line in logs if line["message"].startswith("many kubelets went quiet")] == [3]
    assert not [line for line in logs if line["message"] == QUIET_MESSAGE]


def test_a_forbidden_lease_list_ends_the_wait_with_a_warning_and_the_first_pass_result_stands(api, kubeconfig):
    """RBAC from before this feature grants get, not list, on Leases: a warning that names the cause."""
    quiet_node(api)
    api.faults.append(Fault("status", verb="list", resource="leases", status=403))

    code, logs, took = one_pass(kubeconfig)

    assert code == EXIT_OK and took < 15 and len(api.objects("pods")) == 1
    warned = [line for line in logs if line["message"].startswith("cannot watch quiet nodes: RBAC does not grant "
                                                                  "list on leases in kube-node-lease")]
    assert len(warned) == 1 and ("403" in warned[0]["error"] or "forbidden" in warned[0]["error"].lower())


def test_a_node_silent_for_long_is_not_waited_for(api, kubeconfig):
    """A node dead for an hour that never got a shutdown taint (bare metal, nothing adds one) cost every
    CronJob run the whole budget, about 25 s and 48 GETs: a cloud's taint comes within seconds of NotReady,
    the node-monitor grace (50 s upstream) after the last renewal, or not at all."""
    fc.live_node(api, "w0")
    quiet_node(api, "long", lease_renewed_ago=3600)

    code, logs, took = one_pass(kubeconfig)

    assert code == EXIT_OK and took < 15
    assert not [line for line in logs if line["message"] == QUIET_MESSAGE]
