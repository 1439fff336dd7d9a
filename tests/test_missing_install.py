"""Silent losses (issue 28): a create answered 404 (a namespace never created, an API not installed) is a failure
with its cause named, never "someone else finished it"; start-up says once what is off."""

from __future__ import annotations

from rwo_failover.run.exitcodes import EXIT_FAILED, EXIT_OK
from rwo_testkit import fake_cluster as fc

OFF = "off: what the settings need does not exist"


def test_without_the_recovery_namespace_every_record_create_is_a_named_failure(api, run_pass):
    """The issue's case: run by hand on a cluster without RECOVERY_NAMESPACE, every record's create got 404, was
    filed as "gone", and recovery confirmation was silently off, exit 0 every pass."""
    fc.outage(api)
    api.missing_namespaces.add("rwo-failover")
    result = run_pass()
    assert result.code == EXIT_FAILED
    [failed] = [line for line in result.logs if line["level"] == "ERROR" and "recovery record" in line["message"]]
    assert 'namespaces "rwo-failover" not found' in failed["message"]
    # Our taint is never added without its record (issue 35): that failure is named too, no taint goes on, and with
    # the handoff on the attachment waits for it (ceph-csi fences on the taint), a failure the next pass retries.
    [untainted] = [line for line in result.logs if line["level"] == "ERROR" and "taint record" in line["message"]]
    assert 'namespaces "rwo-failover" not found' in untainted["message"]
    assert not [t for t in api.get("nodes", "dead")["spec"]["taints"]
                if t["key"] == "node.kubernetes.io/out-of-service"]
    assert result.summary["failures"] == 3 and result.summary["attachments_held"] == 1
    assert api.get("pods", "db-0", "default") is None, "the pods are still freed"


def test_start_up_says_once_that_recovery_confirmation_is_off(api, run_pass):
    fc.outage(api)
    api.missing_namespaces.add("rwo-failover")
    first = run_pass()
    [off] = first.lines(OFF)
    assert off["level"] == "WARNING" and off["setting"] == "RECOVERY_NAMESPACE=rwo-failover"
    assert "recovery confirmation" in off["off"] and "the out-of-service taint" in off["off"]
    # The pod is still freed; its recovery record cannot be written, nor our taint's record (issue 35: it lives
    # there), so the taint is not added and the handoff keeps the attachment: exit 1, three failures. Issue 37:
    # this test passed when every pass crashed.
    assert first.code == EXIT_FAILED and first.summary["pods_deleted"] == 1 and first.summary["failures"] == 3
    assert first.summary["taints_added"] == 0 and first.summary["attachments_held"] == 1
    api.missing_namespaces.discard("rwo-failover")  # created: start-up has nothing more to say
    second = run_pass()
    assert not second.lines(OFF) and second.code == EXIT_OK


def test_without_the_networkfence_api_start_up_says_fencing_cannot_work_and_the_create_fails(api, run_pass):
    fc.outage(api)
    api.missing_apis.add("networkfences")
    result = run_pass(FENCING="networkfence", NETWORK_FENCE_CLASS="ceph")
    [off] = result.lines(OFF)
    assert off["setting"] == "FENCING=networkfence" and "csiaddons" in off["off"]
    assert api.get("pods", "db-0", "default") is not None
    # What must happen (issue 37: `code != 0` accepted a crash): the create fails, named, and the pass exits 1.
    assert result.code == EXIT_FAILED and result.summary["failures"] == 1
    assert [line for line in result.logs if line["message"].startswith("creating NetworkFence dead failed")]
