"""Attacks on the digest record of a fence's addresses (b0332f9) and its three companions (the 2 s clock tolerance
of a recovery record's deletedAt, the live re-read of recovery pods for a record come due, the 317-character cache
key), each a real pass over HTTP against the fixture API server, which refuses (422) annotations over 256 KiB in
all, as the real API server does. Each test here was a defect an attack found (a strict xfail until its fix).

- Round trips / size: the digest lets the fence of a node reporting thousands of addresses be created, but the
  same node's failover writes its addresses again, plain and whole, into the out-of-service taint's record on the
  Node (rwo-failover.io/taint-addresses): over the API server's 256 KiB of annotations, so the taint patch is
  refused and the volume is never released: the node issue 27 wanted fenced still never fails over.
- Round trips / size: the unfencing patch records the fence's status as read (rwo-failover.io/asked), the storage
  controller's message whole: a long message makes every unfencing patch too big, and the fence is never lifted.
- Messages bounded: the same node's addresses are logged whole (the create's log line, and every pass's refusal
  when one address changed while it was down): log lines of 300 KB, which container runtimes split at 16 KiB.
- Clocks: a record whose deletedAt is up to 2 s past the reading pass's "now" is judged, and confirmed at once:
  the replacement's Ready time is bounded by now, before our delete, so the failover sample is shorter than the
  part of it that was "waiting on us".
"""

from __future__ import annotations

import json
import time

import pytest
from helpers import detached, recovery_records
from test_fence_identity import back, fenced, writes
from test_fence_lifecycle_attacks import many_addresses
from test_fencing import fence_of, networkfence, set_result
from test_recovery_reads_attack import deployment_outage

from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit import fake_cluster as fc


@pytest.fixture
def cluster(api):
    fc.outage(api)  # w0..w2 live; "dead" down 600 s with db-0 stuck and its RWO volume attached
    return api


def with_many_addresses(api, changed: int = -1) -> None:
    node = api.get("nodes", "dead")
    node["status"]["addresses"] = many_addresses(changed=changed)  # 7,000 IPv6 InternalIPs
    api.add(node)


def test_a_node_fenced_by_the_digest_of_its_addresses_fails_over(cluster, run_pass):
    """Issue 27 made the fence of a node with about 6,500 IPv6 addresses fit the API server's 256 KiB of
    annotations. The fence now is created and answers Succeeded; the failover then adds our out-of-service taint
    with its record of the machine, status.addresses as type=address, comma-separated, whole: 331,629 bytes for
    7,000 addresses. The API server refuses that patch, every pass: the taint never goes on, and the volume is
    never released (ceph-csi's blocklist needs the taint)."""
    with_many_addresses(cluster)

    networkfence(run_pass)
    assert [r.status for r in writes(cluster, "create") if r.could_change] == [201], "the digest fits: created"
    set_result(cluster, "Succeeded")
    networkfence(run_pass)
    networkfence(run_pass)

    refused = [r for r in cluster.requests if (r.verb, r.resource, r.status) == ("patch", "nodes", 422)]
    assert not refused, f"{len(refused)} node patches refused as too long"
    assert detached(cluster) == [], "the dead node's volume is released"


def test_a_fence_whose_controller_wrote_a_long_message_is_still_unfenced(cluster, run_pass):
    """Round trip: the addresses record is bounded now (the digest), but the other annotation we write on the
    fence is built from what the storage controller wrote: the unfencing patch records the status before it,
    message included. A 300 KB status.message (a driver's error listing what it fenced, say) makes the patch's
    annotations over 256 KiB: refused on every pass, the fence stays, and so does our taint."""
    fenced(cluster, run_pass)
    set_result(cluster, "Succeeded", "fenced " + ", ".join(f"fd00::{i:x}/128" for i in range(20000)))
    back(cluster)

    networkfence(run_pass)

    refused = [r for r in writes(cluster, "patch") if r.status == 422]
    assert not refused and fence_of(cluster)["spec"]["fenceState"] == "Unfenced"


# A container runtime splits a log line longer than 16 KiB into partial lines (containerd's CRI logs, Docker's
# json-file): a JSON log line past it no longer parses as one line in the log store.
LOG_LINE_LIMIT = 16 * 1024


def test_log_lines_stay_bounded_for_a_node_with_thousands_of_addresses(cluster, run_pass):
    """Messages bounded: what is quoted comes from objects others write (planner/fencing.py `_few`). A node's
    InternalIPs are its kubelet's to write; with 7,000 of them the create's "asked for fencing" line carries every
    CIDR, and once one address changed while the node is still down, every pass's refusal (_other_addresses) lists
    them all again."""
    with_many_addresses(cluster)
    created = networkfence(run_pass)
    set_result(cluster, "Succeeded")
    with_many_addresses(cluster, changed=4321)
    refused = networkfence(run_pass)

    lines = [(len(json.dumps(line)), line.get("message", "")[:60]) for line in created.logs + refused.logs]
    assert max(lines) < (LOG_LINE_LIMIT, ""), sorted(lines, reverse=True)[:3]


def test_a_record_from_slightly_ahead_never_yields_a_failover_shorter_than_our_own_wait(api, run_pass):
    """Clocks: the change judges a record whose deletedAt is up to CLOCK_TOLERANCE_SECONDS later than the pass's
    "now" (written through an API server whose clock is ahead, read through one behind). The replacement is
    Running and Ready with its volume attached: the record is confirmed in that pass, and _ready_at bounds the
    replacement's Ready time by our delete and then by now, which is earlier. The Event reads "598s after its
    node went NotReady, of which 600s until rwo-failover freed the volume", and the histogram gets 598 s: a
    replacement Ready before its volume was freed."""
    deployment_outage(api)
    while time.time() % 1 > 0.1:  # the first pass starts just past a whole second: its deletedAt is that second
        time.sleep(0.01)
    assert run_pass(OUT_OF_SERVICE_TAINT="never").code == EXIT_OK
    assert len(recovery_records(api)) == 1
    api.add(fc.pod("app-7d9f-q8w2p", "w1", namespace="shop", claims=["data-app"], owner="ReplicaSet", ready="True"))
    api.add(fc.attachment("pv-shop-data-app", "w1"))
    api.date_offset = -1.5  # this pass's answers come from an API server whose clock is 1.5 s behind the writer's

    result = run_pass(OUT_OF_SERVICE_TAINT="never")

    [confirmed] = result.lines("recovery confirmed")
    assert confirmed["failover_seconds"] >= confirmed["waited_on_us_seconds"], confirmed
