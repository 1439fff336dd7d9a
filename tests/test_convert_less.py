"""Issue 25's storms at 5,000 nodes: a pass converts only what it keeps, a relist only what changed, and a pass
from the cache looks only at nodes that can get a verdict (fixture tier, real client).

Before: a 410 storm relisted 5,000 unchanged nodes every few seconds, converting each again (0.95 CPU s a
list: the first minute of the storm cost 5.9% of a core); every pass that read attachments, claims or PVs by
list converted all 20,000 of each to keep 30; a pass from the cache swept all 5,000 nodes a dozen times
(a flapping shutdown taint, a pass a second: 5.3% of a core). docs/performance.md has the figures.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

from rwo_failover import settings as config
from rwo_failover.kube import Api, load_api_client
from rwo_failover.kube.decode import Memo, decode_page
from rwo_failover.kube.reflector import Reflector
from rwo_failover.kube.shapes import Node as NodeShape
from rwo_failover.kube.sources import NODES
from rwo_failover.model import Attachment, Claim, Fence, Node, Pod, Reader, Snapshot, TaintRecord, Unreadable, Volume
from rwo_testkit import fake_cluster as fc


class Counting:
    """A conversion that counts its calls."""

    def __init__(self, convert):
        self.convert, self.calls = convert, 0

    def __call__(self, obj):
        self.calls += 1
        return self.convert(obj)


def api_for(kubeconfig: str) -> Api:
    settings = config.load(["--once"], {"KUBECONFIG": kubeconfig})[1]
    return Api(load_api_client(settings), settings)


def test_a_relist_converts_again_only_the_nodes_that_changed_and_reads_the_same(api, kubeconfig):
    for i in range(40):
        api.add(fc.node(f"node-{i:02d}", ready="True", since=600, images=5))
    settings = config.load(["--interval", "5"], {"KUBECONFIG": kubeconfig, "PAGE_SIZE": "7"})[1]
    api_client = load_api_client(settings)
    counting = Counting(Node.from_json)
    found = Reflector(dataclasses.replace(NODES, from_json=counting), lambda: Api(api_client, settings), settings,
                      on_change=lambda _why: None)
    try:
        found.relist("initial")
        assert counting.calls == 40
        tainted = fc.node("node-03", ready="Unknown", since=60, taints=[fc.SHUTDOWN], images=5)
        api.add(tainted)
        odd = fc.node("node-07", ready="True", since=600, images=5)
        odd["spec"]["taints"] = "not a list"  # unreadable now: skipped with its reason, never its older copy
        api.add(odd)
        counting.calls = 0

        found.relist("expired")

        assert counting.calls == 1  # node-03; node-07's page was read item by item, its taints never converted
        assert found.items["node-03"] == Node.from_json(tainted)
        assert isinstance(found.items["node-07"], Unreadable)
        assert found.items["node-05"] == Node.from_json(api.get("nodes", "node-05"))
        api.add(fc.node("node-07", ready="True", since=600, images=5))
        counting.calls = 0
        found.relist("expired")
        assert counting.calls == 1 and isinstance(found.items["node-07"], Node)
    finally:
        found.stop()


def test_a_memo_reuses_a_conversion_only_for_the_same_decoded_fields():
    node = fc.node("a", ready="True", since=600)
    page = {"metadata": {"resourceVersion": "9"}, "items": [node]}
    counting = Counting(Node.from_json)
    first = Memo(counting)
    items, _token, version = decode_page(json.dumps(page).encode(), NodeShape, memo=first)
    assert (items, version, counting.calls) == ([Node.from_json(node)], "9", 1)
    # A field no pass reads (the images) changes nothing that is decoded: the conversion is reused.
    node["status"]["images"] = [{"names": ["x"], "sizeBytes": 1}]
    again = Memo(counting, first)
    assert decode_page(json.dumps(page).encode(), NodeShape, memo=again)[0] == items and counting.calls == 1
    # The Ready condition is read: converted again.
    node["status"]["conditions"][0]["status"] = "Unknown"
    third = Memo(counting, again)
    assert decode_page(json.dumps(page).encode(), NodeShape, memo=third)[0] == [Node.from_json(node)]
    assert counting.calls == 2


def test_an_attachment_list_converts_only_those_on_the_nodes_or_of_the_volumes_asked(api, kubeconfig):
    for i in range(30):
        api.add(fc.attachment(f"pv-{i}", f"node-{i % 10}"))
    odd = fc.attachment("pv-odd", "node-9")
    odd["spec"]["nodeName"] = 7  # its node cannot be told: converted, and judged (unreadable), as before
    api.add(odd)
    reader, counting = Reader(), Counting(Attachment.from_json)

    found = reader.each(api_for(kubeconfig).list_attachments(reader.parse("volumeattachment", counting),
                                                             {"node-1"}, {"pv-2"}))

    assert sorted(a.volume for a in found) == ["pv-1", "pv-11", "pv-2", "pv-21"]
    assert counting.calls == 5
    assert [u.kind for u in reader.unreadable] == ["volumeattachment"]


def test_a_claim_and_pv_list_converts_only_those_named(api, kubeconfig):
    for i in range(30):
        fc.add_volume(api, f"data-{i}", namespace=f"team-{i % 3}")
    client = api_for(kubeconfig)
    claims, volumes = Counting(Claim.from_json), Counting(Volume.from_json)

    got = client.list_claims(claims, {("team-1", "data-1"), ("team-2", "data-1")})
    pvs = client.list_volumes(volumes, {"pv-team-1-data-1", "pv-nowhere"})

    assert [(c.namespace, c.name) for c in got] == [("team-1", "data-1")] and claims.calls == 1
    assert [v.name for v in pvs] == ["pv-team-1-data-1"] and volumes.calls == 1
    assert len(client.list_claims(Counting(Claim.from_json))) == 30  # asked for none in particular: every one


def test_a_namespace_pod_list_for_recovery_converts_only_pods_mounting_the_claims_or_freed(api, kubeconfig):
    for i in range(40):
        api.add(fc.pod(f"web-{i}", "node-1", namespace="team", claims=[f"other-{i}"], owner="ReplicaSet"))
    api.add(fc.pod("web-new", "node-2", namespace="team", claims=["data"], owner="ReplicaSet"))
    api.add(fc.pod("eph", "node-2", namespace="team", ephemeral=["scratch"], owner="ReplicaSet"))
    freed = api.add(fc.pod("web-old", "node-3", namespace="team", owner="ReplicaSet"))
    odd = fc.pod("odd", "node-2", namespace="team", ephemeral=["x"], owner="ReplicaSet")
    odd["spec"]["volumes"][0]["name"] = ["not", "a", "name"]  # cannot be told: converted, and unreadable
    api.add(odd)
    reader, counting = Reader(), Counting(Pod.from_json)

    found = reader.each(api_for(kubeconfig).list_pods_in("team", reader.parse("pod", counting),
                                                         ({"data", "eph-scratch"}, {freed["metadata"]["uid"]})))

    assert sorted(p.name for p in found) == ["eph", "web-new", "web-old"]
    assert counting.calls == 4 and [u.name for u in reader.unreadable] == ["team/odd"]


def test_only_nodes_with_a_taint_our_record_or_a_fence_are_marked():
    tainted = Node.from_json(fc.node("tainted", ready="True", since=60, taints=[fc.SHUTDOWN]))
    raw = fc.node("ours", ready="True", since=60)
    raw["metadata"]["uid"] = "uid-ours"
    ours = Node.from_json(raw).with_record({"rwo-taint-uid-ours": TaintRecord(
        "ours", "uid-ours", "boot", "", "2026-11-21T10:00:00Z", name="rwo-taint-uid-ours")})
    fenced, plain = Node("fenced"), Node.from_json(fc.node("plain", ready="True", since=60))
    fence = Fence("fenced", ours=True, state="Fenced", result="Succeeded")
    snapshot = Snapshot(datetime.now(UTC), (tainted, ours, fenced, plain), fences={"fenced": fence})

    assert [n.name for n in snapshot.marked] == ["tainted", "ours", "fenced"]
    assert snapshot.by_name["plain"] is plain
