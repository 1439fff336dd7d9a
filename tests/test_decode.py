"""Issue 26, items 1 and 2: no object a tenant writes can crash or bloat decoding (fixture tier, real client).

`metadata.managedFields[].fieldsV1` is client-writable and the API server decodes it 10,000 levels deep;
an object may be up to its 1.5 MiB limit. Before kube/decode.py, a claim nested ~1,100 levels made every
list of claims raise RecursionError (exit 4, 0 of 21 pods freed), the same pod on a stopped node stopped
every pass, and 24 pods of 1.4 MB each made one pass 334 MiB (over the manifests' 256Mi limit).
"""

from __future__ import annotations

import json

import pytest

from rwo_failover.model import Attachment, Claim, Fence, Lease, Node, Pod, Reader, RecoveryEntry, Volume
from rwo_failover.run.exitcodes import EXIT_OK, EXIT_UNAVAILABLE
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import Fault
from rwo_testkit.managed_fields import bulky, expand, hostile_entry, nested

STUCK = [f"db-{i}" for i in range(21)]  # one claim more than GETS_BEFORE_LIST: the pass lists claims
MAX_OBJECT_BYTES = 1_400_000  # under the API server's 1.5 MiB request limit, with the rest of a pod


def freed(api, pods=STUCK) -> bool:
    return all(api.get("pods", name, "default") is None for name in pods)


def skips(result, kind: str) -> list[dict]:
    return [line for line in result.lines("skipped") if line["kind"] == kind]


@pytest.mark.parametrize("depth", [1_100, 10_000])
def test_a_claim_nested_deeper_than_python_goes_is_one_unreadable_claim_not_a_failed_list(api, run_pass, depth):
    fc.outage(api, pods=STUCK, live=5)
    hostile, _pv, _va = fc.add_volume(api, "hostile", namespace="tenant")
    hostile["metadata"]["managedFields"] = [hostile_entry(nested(depth))]
    api.add(hostile)

    result = run_pass()

    assert result.code == EXIT_OK, [line for line in result.logs if line["level"] != "INFO"][:4]
    assert freed(api)
    # Nobody's pod uses it: it is none of this pass's business, so it is not reported either.
    assert not skips(result, "persistentvolumeclaim")


@pytest.mark.parametrize("depth", [1_100, 10_000])
def test_a_deep_claim_of_a_stuck_pod_withholds_its_node_only_and_is_reported_unreadable(api, run_pass, depth):
    fc.outage(api, pods=STUCK, live=6)
    fc.dead_node(api, "stopped")
    claim, _pv, _va = fc.add_volume(api, "data-web-0", attached_to="stopped")
    claim["metadata"]["managedFields"] = [hostile_entry(nested(depth))]
    api.add(claim)
    api.add(fc.pod("web-0", "stopped", claims=["data-web-0"], terminating=True))

    result = run_pass()

    assert result.code == EXIT_OK, [line for line in result.logs if line["level"] != "INFO"][:4]
    assert freed(api)
    assert api.get("pods", "web-0", "default") is not None
    # (observe reads claims twice, for pods and for volumes, and logs the skip each time: one object all the same)
    [(name, reason)] = {(skip["object"], skip["reason"]) for skip in skips(result, "persistentvolumeclaim")}
    assert name == "default/data-web-0" and "levels deep" in reason
    [node_skip] = [skip for skip in skips(result, "node") if skip["object"] == "stopped"]
    assert "cannot be read" in node_skip["reason"]


@pytest.mark.parametrize("depth", [1_100, 10_000])
def test_a_deep_pod_on_a_stopped_node_is_skipped_with_a_reason_and_the_rest_freed(api, run_pass, depth):
    fc.outage(api, pods=STUCK, live=6)
    fc.dead_node(api, "stopped")
    fc.add_volume(api, "data-web-0", attached_to="stopped")
    hostile = fc.pod("web-0", "stopped", claims=["data-web-0"], terminating=True)
    hostile["metadata"]["managedFields"] = [hostile_entry(nested(depth))]
    api.add(hostile)

    result = run_pass()

    assert result.code == EXIT_OK, [line for line in result.logs if line["level"] != "INFO"][:4]
    assert freed(api)
    assert api.get("pods", "web-0", "default") is not None  # unreadable: never acted on
    [skip] = skips(result, "pod")
    assert skip["object"] == "default/web-0" and "levels deep" in skip["reason"]


def test_a_deep_pod_read_by_a_get_is_unreadable_too(api, kubeconfig):
    """A GET (recovery confirmation reads pods one by one) decodes as a list does."""
    from rwo_failover import settings as config
    from rwo_failover.kube import Api, load_api_client

    hostile = fc.pod("web-0", "stopped")
    hostile["metadata"]["managedFields"] = [hostile_entry(nested(10_000))]
    api.add(hostile)
    _args, settings = config.load(["--once"], {"KUBECONFIG": kubeconfig})
    reader = Reader()

    found = reader.one("pod", Pod.from_json, Api(load_api_client(settings), settings).read_pod("default", "web-0"))

    assert found is None
    [unreadable] = reader.unreadable
    assert unreadable.name == "default/web-0" and "levels deep" in unreadable.reason


@pytest.mark.slow  # ~40 s: the fixture itself decodes and re-encodes each 1.4 MB pod it deletes
def test_24_maximum_size_pods_on_a_dead_node_are_freed_a_tenth_of_a_page_at_a_time(api, run_pass):
    """Their managedFields are never built (bench/scale.py measures the memory). kube-apiserver answers a list at
    resourceVersion "0" whole, whatever its limit (v1.36.2, measured): 34 MB here, over MAX_PAGE_BYTES, so the list
    is made again without a resourceVersion, paginated, each page over the bound asked again with a tenth of the
    limit. Before, the whole answer was asked for again and again, and the pass failed (exit 4) on a real server.
    Pods are now listed consistently (issue 36), without a resourceVersion: paginated from the start."""
    pods = [f"big-{i}" for i in range(24)]
    fc.outage(api, pods=pods, live=5)
    padding = [hostile_entry(bulky(MAX_OBJECT_BYTES))]
    for name in pods:
        pod = api.get("pods", name, "default")
        pod["metadata"]["managedFields"] = padding
        api.add(pod)

    result = run_pass("--page-size", "500", PASS_TIMEOUT_SECONDS="240")

    assert result.code == EXIT_OK, [line for line in result.logs if line["level"] != "INFO"][:4]
    assert freed(api, pods)
    asked = [(int(r.query["limit"]), r.query.get("resourceVersion", "")) for r in result.requests
             if r.verb == "list" and r.resource == "pods"]
    assert asked[:3] == [(500, ""), (50, ""), (5, "")], asked
    assert result.lines("list page too large; asking for fewer items")


# --- the Structs against from_json: every field a model reads survives decoding ---------------------------

KINDS = [
    ("Node", Node.from_json, lambda: fc.node("n1", ready="False", since=60, taints=[fc.our_taint()])),
    ("Pod", Pod.from_json, lambda: fc.pod("db-0", "n1", claims=["a"], ephemeral=["e"], terminating=True,
                                             reason="NodeLost", annotations={"kubernetes.io/config.mirror": "x"})),
    ("Claim", Claim.from_json, lambda: fc.claim("a", annotations={"rwo-failover.io/opt-out": "true"})),
    ("Volume", Volume.from_json, lambda: fc.volume("pv", "a", claim_uid="u1")),
    ("Attachment", Attachment.from_json, lambda: fc.inline_attachment("n1")),
    ("Attachment", Attachment.from_json, lambda: fc.attachment("pv", "n1")),
    ("Lease", Lease.from_json, lambda: fc.lease("n1", 30)),
]


@pytest.mark.parametrize("shape, from_json, build", KINDS)  # shape: a Struct's name in kube/shapes.py
def test_each_kind_reads_the_same_through_its_struct_as_from_the_whole_json(shape, from_json, build):
    from rwo_failover.kube import decode, shapes
    obj = build()
    obj["metadata"]["managedFields"] = [hostile_entry(bulky(10_000)), *obj["metadata"].get("managedFields", [])]
    body = json.dumps(obj).encode()

    slim = decode.decode_object(body, getattr(shapes, shape))

    assert from_json(slim) == from_json(obj)
    assert len(json.dumps(slim)) < 2_500  # the 10,000-byte fieldsV1 padding was never kept (a slim Node: ~2,050)


def test_a_fence_and_a_recovery_record_read_the_same_through_their_structs():
    from rwo_failover.kube import decode, shapes

    fence = {"metadata": {"name": "n1", "generation": 2, "labels": {"rwo-failover.io/fence": "rwo-failover"},
                          "annotations": {}, "managedFields": [hostile_entry(bulky(5_000))]},
             "spec": {"fenceState": "Fenced", "cidrs": ["10.0.0.1/32"]},
             "status": {"result": "Succeeded", "message": "ok", "conditions": [{"observedGeneration": 2}]}}
    record = {"metadata": {"name": "r1", "resourceVersion": "7"}, "data": {"record": "{\"pod\": \"x\"}"}}
    assert Fence.from_json(decode.decode_object(json.dumps(fence).encode(), shapes.Fence)) == Fence.from_json(fence)
    assert RecoveryEntry.from_json(decode.decode_object(json.dumps(record).encode(), shapes.Record)) == \
        RecoveryEntry.from_json(record)


def test_a_page_with_a_wrong_type_and_a_deep_object_loses_only_those_two():
    from rwo_failover.kube import decode, shapes

    good = fc.pod("a-0", "n1")
    wrong = fc.pod("b-0", "n1")
    wrong["spec"]["nodeName"] = 5
    deep = fc.pod("c-0", "n1")
    deep["metadata"]["managedFields"] = [hostile_entry(nested(3_000))]
    body = expand(json.dumps({"metadata": {"resourceVersion": "9", "continue": "t"},
                              "items": [good, wrong, deep, good]}).encode())
    reader = Reader()

    items, token, version = decode.decode_page(body, shapes.Pod)
    pods = reader.each(reader.parse("pod", Pod.from_json)(item) for item in items)

    assert (token, version) == ("t", "9")
    assert [p.name for p in pods] == ["a-0", "a-0"]
    assert [u.name for u in reader.unreadable] == ["default/b-0", "default/c-0"]


def test_a_watch_event_of_a_deep_object_is_one_unreadable_object_and_the_stream_goes_on():
    from rwo_failover.kube import decode, shapes

    deep = fc.pod("c-0", "n1")
    deep["metadata"]["resourceVersion"] = "42"
    deep["metadata"]["managedFields"] = [hostile_entry(nested(10_000))]
    line = expand(json.dumps({"type": "MODIFIED", "object": deep}).encode())
    reader = Reader()

    event = decode.decode_event(line, shapes.Pod)

    assert event["type"] == "MODIFIED" and event["raw_object"]["metadata"]["resourceVersion"] == "42"
    assert reader.parse("pod", Pod.from_json)(event["raw_object"]) is None
    assert "levels deep" in reader.unreadable[0].reason


def test_a_deep_object_with_an_integer_past_64_bits_is_still_one_unreadable_object():
    """Found by the fuzz tier: yajl, ijson's C backend, refused the whole page ("integer overflow")."""
    from rwo_failover.kube import decode, shapes

    deep = fc.pod("c-0", "n1")
    deep["apiVersion"] = 2**63
    deep["metadata"]["managedFields"] = [hostile_entry(nested(10_000))]
    body = expand(json.dumps({"metadata": {"resourceVersion": "9"}, "items": [fc.pod("a-0", "n1"), deep]}).encode())

    items, _token, _version = decode.decode_page(body, shapes.Pod)

    assert [type(item).__name__ for item in items] == ["dict", "Undecodable"]
    assert "levels deep" in items[1].reason


@pytest.mark.parametrize("resource", ["nodes", "volumeattachments"])
def test_an_answer_that_is_not_utf8_is_a_failed_read_named_as_such_never_a_crash(api, run_pass, resource):
    """Found attacking issue 25's decoding: a proxy's answer with bytes that are not UTF-8 made msgspec raise
    UnicodeDecodeError, which no read expected: the pass crashed (exit 70, "a bug") instead of failing the read
    (retried, then exit 4 naming the cause), as json.loads's error on a cut body does."""
    fc.outage(api)
    api.inject(Fault("reshape", verb="list", resource=resource, body=b'{"items": [{"metadata": {"name": "\xff"}}]}'))

    result = run_pass()

    assert result.code == EXIT_UNAVAILABLE, [line for line in result.logs if line["level"] != "INFO"][:3]
    errors = [str(line.get("error", "")) for line in result.logs if line["level"] == "ERROR"]
    assert any("utf-8" in e for e in errors), errors
    assert api.get("pods", "db-0", "default") is not None
