"""Issue 25's storms at 5,000 nodes: a pass from the cache looks only at nodes that can get a verdict (a flapping
shutdown taint, a pass a second, swept all 5,000 nodes a dozen times a pass: 5.3% of a core; docs/performance.md).
"""

from __future__ import annotations

from datetime import datetime, timezone

from rwo_failover.model import Fence, Node, Snapshot
from rwo_testkit import fake_cluster as fc


def test_only_nodes_with_a_taint_our_annotation_or_a_fence_are_marked():
    tainted = Node.from_json(fc.node("tainted", ready="True", since=60, taints=[fc.SHUTDOWN]))
    ours = Node.from_json(fc.mark_ours(fc.node("ours", ready="True", since=60)))
    fenced, plain = Node("fenced"), Node.from_json(fc.node("plain", ready="True", since=60))
    fence = Fence("fenced", ours=True, state="Fenced", result="Succeeded")
    snapshot = Snapshot(datetime.now(timezone.utc), (tainted, ours, fenced, plain), fences={"fenced": fence})

    assert [n.name for n in snapshot.marked] == ["tainted", "ours", "fenced"]
    assert snapshot.by_name["plain"] is plain
