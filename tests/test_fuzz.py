"""The fuzz tier (issue 18): hostile, type-confused and truncated JSON for every object kind a pass reads, and
for the fence webhook's answers (strategies in rwo_testkit/hostile.py).

Properties:
- every parser returns a value or raises BadObject (a typed skip), never anything else; and a field of the
  wrong JSON type is never coerced into a value that differs from the valid object's;
- a pass over a fixture cluster holding one hostile object of each kind next to a real outage still fails
  that outage over, touches nothing else, and never exits 70;
- no planted secret ever appears in its output.

`make test` runs the "fast" profile (bounded examples); CI sets HYPOTHESIS_PROFILE=ci for a longer run
(both registered in conftest.py).
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from conftest import SESSION_LOG, SESSION_REQUESTS, plant
from hypothesis import HealthCheck, event, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from rwo_failover.act.events import NotOurs, bump_of
from rwo_failover.act.fence_webhook import judge_answer
from rwo_failover.kube import decode, shapes
from rwo_failover.kube.deep import MAX_DEPTH
from rwo_failover.model import (
    OPT_OUT_ANNOTATION,
    OUT_OF_SERVICE_KEY,
    RECOVERY_ANNOTATION,
    RECOVERY_LABEL,
    Attachment,
    BadObject,
    Claim,
    Fence,
    Lease,
    Node,
    Pod,
    Undecodable,
    Volume,
)
from rwo_failover.planner.recovery import Record
from rwo_failover.run.cli import main
from rwo_failover.run.exitcodes import EXIT_CRASH
from rwo_testkit import fake_cluster as fc
from rwo_testkit import hostile as h
from rwo_testkit.control_plane import free_port
from rwo_testkit.fake_apiserver import FakeApiServer
from rwo_testkit.managed_fields import bulky, expand, hostile_entry, nested

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
BUMPED = ("alive", "uid-alive", "ShutdownTaintOnLiveNode")  # the node, its uid, and the reason of h.event()
FROM_JSON: dict[str, Callable[[Any], Any]] = {
    "node": Node.from_json, "lease": Lease.from_json, "pod": Pod.from_json, "claim": Claim.from_json,
    "volume": Volume.from_json, "attachment": Attachment.from_json, "networkfence": Fence.from_json}
PARSERS: dict[str, Callable[[Any], Any]] = dict(
    FROM_JSON, event=lambda obj: bump_of(obj, NOW, "2026-11-21T12:00:00Z", message="message", node=BUMPED[0],
                                         uid=BUMPED[1], reason=BUMPED[2]),
    record=lambda obj: Record.parse(json.dumps(obj)))


# --- every parser: a value, or a typed skip ----------------------------------------------------------------

@pytest.mark.parametrize("kind", h.KINDS)
@given(data=st.data())
def test_every_parser_returns_a_value_or_a_typed_skip(kind, data):
    obj, how = data.draw(h.of_kind(kind))
    try:
        found = PARSERS[kind](obj)
    except BadObject:
        return
    if kind in FROM_JSON and how.how in ("confuse", "tricky") and how.confused:
        # A field of another JSON type is never coerced: the object is skipped, or the field is one the
        # parser does not read. A string is not a list of access modes; "false" is not a bool.
        assert found == FROM_JSON[kind](h.VALID[kind]), f"{how.confused} was coerced: {found}"


@given(h.record_texts())
def test_a_stored_recovery_record_parses_or_is_a_typed_skip(text):
    with contextlib.suppress(BadObject):
        Record.parse(text)


@given(data=st.data())
def test_a_repeated_events_bump_is_sane_whatever_the_event_holds(data):
    """Never a bump of an Event that is not our Warning about that node; a bump of ours points it at the node as
    it is now, and repairs whatever count or time it holds."""
    obj, _how = data.draw(h.of_kind("event"))
    try:
        bump = bump_of(obj, NOW, "2026-11-21T12:00:00Z", message="message", node=BUMPED[0], uid=BUMPED[1],
                       reason=BUMPED[2])
    except NotOurs:
        involved = obj.get("involvedObject") if isinstance(obj, dict) else None
        assert not (isinstance(involved, dict) and involved.get("kind") == "Node" and involved.get("name") == "alive"
                    and obj.get("type") == "Warning" and obj.get("reason") == BUMPED[2]
                    and isinstance(obj.get("source"), dict) and obj["source"].get("component") == "rwo-failover"), obj
        return
    assert obj["type"] == "Warning" and obj["reason"] == BUMPED[2] and obj["involvedObject"]["kind"] == "Node"
    if bump is not None:
        assert isinstance(bump["count"], int) and 2 <= bump["count"] <= 2**31 - 1
        assert bump["lastTimestamp"] == "2026-11-21T12:00:00Z"
        assert bump["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "alive", "uid": "uid-alive",
                                          "namespace": None}


@given(h.webhook_answers("dead", "uid-1"))
def test_a_webhook_answer_is_believed_only_when_it_is_the_contracts_yes(answer):
    status, body = answer
    fenced, why = judge_answer(status, body, {"node": "dead", "uid": "uid-1"})
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    exact = isinstance(parsed, dict) and parsed.get("fenced") is True and parsed.get("node") == "dead" \
        and parsed.get("uid") == "uid-1"
    assert fenced == (200 <= status <= 299 and exact)
    assert fenced or why


# --- the decoder (kube/decode.py) reads every object as from_json reads it whole (issue 26) --------------------

SHAPES = {"node": shapes.Node, "lease": shapes.Lease, "pod": shapes.Pod, "claim": shapes.Claim,
          "volume": shapes.Volume, "attachment": shapes.Attachment, "networkfence": shapes.Fence}


def outcome(from_json: Callable[[Any], Any], obj: Any) -> Any:
    """What a pass makes of an object: its model value, or "skip" (the Reader's rule for an Undecodable)."""
    if isinstance(obj, Undecodable):
        return "skip"
    try:
        return from_json(obj)
    except BadObject:
        return "skip"


@pytest.mark.parametrize("kind", sorted(SHAPES))
@given(data=st.data(), padding=st.sampled_from([None, 0, 40, 1_100, 10_000]))
def test_the_decoder_reads_every_hostile_object_as_from_json_reads_it_whole(kind, data, padding):
    """Declaring only what from_json reads changes nothing it decides: the same value, or a skip both ways;
    and managedFields nested past what any recursive parser reads makes it one skip, never an exception."""
    obj, _how = data.draw(h.of_kind(kind))
    deep = padding is not None and padding > MAX_DEPTH and isinstance(obj, dict) and \
        isinstance(obj.get("metadata"), dict)
    if padding is not None and isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
        obj["metadata"]["managedFields"] = [hostile_entry(nested(padding))]
    body = expand(json.dumps(obj).encode())

    decoded = decode.decode_object(body, SHAPES[kind])

    if deep:
        # Past msgspec's recursion it is unreadable, whatever else it holds. Hypothesis runs a test with a raised
        # recursion limit, under which msgspec may decode 1,100 levels (skipping them): then it reads as usual.
        obj["metadata"]["managedFields"] = [hostile_entry({})]
        assert outcome(FROM_JSON[kind], decoded) in ("skip", outcome(FROM_JSON[kind], obj))
        assert padding < 10_000 or isinstance(decoded, Undecodable)
    elif padding is None or not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        assert outcome(FROM_JSON[kind], decoded) == outcome(FROM_JSON[kind], obj)
    else:  # shallow padding: what from_json makes of the object with an empty fieldsV1 there
        obj["metadata"]["managedFields"] = [hostile_entry({})]
        assert outcome(FROM_JSON[kind], decoded) == outcome(FROM_JSON[kind], obj)


# --- a pass over a cluster full of hostile objects next to a real outage -----------------------------------

@pytest.fixture(scope="module")
def server():
    with FakeApiServer() as api:
        api.listeners.append(SESSION_REQUESTS.append)
        yield api


ENVELOPE = ("kind", "apiVersion", "metadata")  # what the API server itself guarantees for what it stores
annotation_values = st.text(max_size=30) | st.sampled_from(h.TRICKY_TEXT) | h.record_texts()
annotations = st.dictionaries(st.sampled_from([OPT_OUT_ANNOTATION, RECOVERY_ANNOTATION,
                                              "rwo-failover.io/out-of-service-added-at", "x"]),
                              annotation_values, max_size=3)


def own_fence(node: str) -> dict:
    return h.network_fence(node, [f"{fc.internal_ip(node)}/32"])


def stuck_pod(api: FakeApiServer, node: str, name: str) -> str:
    """A StatefulSet pod stuck on `node` with its RWO volume attached there; the attachment's name."""
    fc.add_volume(api, f"data-{name}", attached_to=node)
    api.add(fc.pod(name, node, claims=[f"data-{name}"], terminating=True))
    return fc.attachment(f"pv-default-data-{name}", node)["metadata"]["name"]


@dataclass
class Allowed:
    """What a pass over one hostile cluster may write besides Events and our recovery records: per node, the pods
    it may delete, the attachments it may delete, and whether it may add the out-of-service taint there."""

    pods: set = field(default_factory=set)
    attachments: set = field(default_factory=set)
    taints: set = field(default_factory=set)
    fences: set = field(default_factory=set)  # NetworkFences it may delete (ours, Unfenced, node down again)

    def act_on(self, node: str, pods: tuple[str, ...], attachment: str) -> None:
        self.pods.update(("default", p) for p in pods)
        self.attachments.add(attachment)
        self.taints.add(node)


def hostile_cluster(api: FakeApiServer, draw: Callable) -> Allowed:
    """Ten live nodes; "dead", a real outage (its NetworkFence answered Succeeded); and hostile objects of each
    kind, in two kinds of place.

    Where a valid version would give the pass nothing to do: a split-brain node's Lease and repeated Event, a
    stray node, and on "dead-2" only what kube-system (excluded) holds.

    Where a wrong belief would make it write: "dead-3", down with a stuck pod, has a hostile NetworkFence that
    no mutation can make trustworthy (not ours, or ours for another address: no mutation writes the node's
    address), so nothing on it may be touched; "dead-4", down with a stuck pod and a sound fence, has a hostile
    pod on it, so nothing on it may be touched whenever that pod cannot be read (a pod we cannot read we cannot
    protect: the out-of-service taint would evict it)."""
    def bad(valid: dict) -> Any:
        obj, _how = draw(h.hostile(valid, protect=ENVELOPE))
        if draw(st.booleans()):
            obj["metadata"]["annotations"] = draw(annotations)
        return api.add(obj)

    api.reset()
    allowed = Allowed()
    for i in range(10):
        fc.live_node(api, f"w{i}")
    fc.dead_node(api, "dead")
    allowed.act_on("dead", ("db-0",), stuck_pod(api, "dead", "db-0"))
    api.add(own_fence("dead"))
    api.add(fc.node("odd", ready="True", since=3600, taints=[fc.SHUTDOWN]))
    bad(fc.lease("odd", 3))
    bad(h.event("odd"))
    bad(fc.node("weird", ready="True", since=3600))
    fc.dead_node(api, "dead-2")
    bad(fc.claim("data-odd", namespace="kube-system", volume="pv-odd"))
    bad(fc.volume("pv-odd", "data-odd", namespace="kube-system", modes=("ReadWriteMany",)))
    bad(fc.attachment("pv-odd", "dead-2"))
    api.add(fc.pod("odd-0", "dead-2", namespace="kube-system", claims=["data-odd"], terminating=True))
    bad(fc.pod("trouble-0", "dead-2", namespace="kube-system", claims=["data-odd"], terminating=True))
    bad(own_fence("dead-2"))
    bad({"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "rwo-recovery-forged", "namespace": "rwo-failover",
                      "labels": {RECOVERY_LABEL: "pending"}},
         "data": {"record": draw(h.record_texts())}})

    fc.dead_node(api, "dead-3")
    stuck_pod(api, "dead-3", "db-3")
    ours = draw(st.booleans())
    bad(h.untrusted_fence("dead-3", ours=ours))
    if ours:  # ours, so a mutation to Unfenced rightly has it deleted, to be asked for again
        allowed.fences.add("dead-3")

    # Issue 26: depth and size, on a page the pass reads: a pod nested deeper than any recursive parser reads,
    # and one as large as the object limit allows, next to the hostile pod on dead-2.
    deep = fc.pod("deep-0", "dead-2", namespace="kube-system")
    deep["metadata"]["managedFields"] = [hostile_entry(nested(draw(st.sampled_from([1_100, 10_000]))))]
    api.add(deep)
    if draw(st.booleans()):  # in half the examples: the fixture's own cost of a 1.5 MB pod is about a second
        big = fc.pod("big-0", "dead-2", namespace="kube-system")
        big["metadata"]["managedFields"] = [hostile_entry(bulky(MAX_OBJECT_BYTES))]
        api.add(big)

    fc.dead_node(api, "dead-4")
    attachment = stuck_pod(api, "dead-4", "db-4")
    api.add(own_fence("dead-4"))
    trouble = bad(fc.pod("trouble-4", "dead-4", claims=["data-db-4"], terminating=True))
    if on_node("dead-4", trouble) and draw(st.integers(0, 3)) == 0:
        # Nested deeper than any recursive parser reads: unreadable, so it withholds its node. (10,000: under
        # hypothesis's raised recursion limit msgspec may read 1,100 levels, skipping them, and the pod with it.)
        trouble["metadata"]["managedFields"] = [hostile_entry(nested(10_000))]
        api.add(trouble)
    if on_node("dead-4", trouble) and not blocks("dead-4", trouble) and draw(st.booleans()):
        # One random mutation leaves a pod readable and on its node most of the time; half the examples make
        # sure it is not readable: a field the parser reads, of another JSON type (it never coerces one).
        where = draw(st.sampled_from([("status",), ("spec", "volumes")]))
        h.put(trouble, where, draw(h.scalars.filter(lambda value: value is not None)))
        api.add(trouble)
    blocked = blocks("dead-4", trouble)
    event(f"dead-3's fence {'ours, for another address' if ours else 'not ours'}; trouble-4 "
          f"{'unreadable on dead-4' if blocked else 'readable, or not on dead-4'}")
    if not blocked:
        allowed.act_on("dead-4", ("db-4", "trouble-4"), attachment)
    return allowed


OUTAGE_ATTACHMENT = fc.attachment("pv-default-data-db-0", "dead")["metadata"]["name"]
MAX_OBJECT_BYTES = 1_400_000  # a pod's managedFields under the API server's 1.5 MiB object limit


def on_node(node: str, pod: Any) -> bool:
    """The pass lists this pod on `node`: the API indexes pods by spec.nodeName as stored."""
    spec = pod.get("spec")
    return isinstance(spec, dict) and spec.get("nodeName") == node


def blocks(node: str, pod: Any) -> bool:
    """True when the pass lists this pod on `node` and cannot read it: then nothing on that node may be
    touched."""
    if not on_node(node, pod):
        return False
    fields = pod["metadata"].get("managedFields") if isinstance(pod.get("metadata"), dict) else None
    if isinstance(fields, list) and any(isinstance(e, dict) and str(e.get("fieldsV1", "")).startswith("@@nested:")
                                        for e in fields):
        return True  # nested too deep (rwo_testkit.managed_fields.nested): unreadable
    try:
        Pod.from_json(pod)
    except BadObject:
        return True
    return False


def allowed_write(req, allowed: Allowed) -> bool:
    """Events, our recovery records, and what `allowed` names; a taint patch only adds the out-of-service taint,
    and a node patch without one only drops our annotation from a node that carries it without our taint (as
    always): nothing else may be written."""
    if req.resource == "events" or (req.resource == "configmaps" and req.namespace == "rwo-failover"):
        return True
    if req.resource == "pods":
        return req.verb == "delete" and (req.namespace, req.name) in allowed.pods
    if req.resource == "volumeattachments":
        return req.verb == "delete" and req.name in allowed.attachments
    if req.resource == "networkfences":
        return req.verb == "delete" and req.name in allowed.fences
    if req.resource == "nodes" and req.verb == "patch":
        meta = dict(req.body["metadata"])
        meta.pop("resourceVersion", None)
        if meta:  # nothing but the taints is ever written on a Node (our record of it lives in our namespace)
            return False
        taints = {t.get("key") for t in req.body.get("spec", {}).get("taints", [])}
        return req.name in allowed.taints and OUT_OF_SERVICE_KEY in taints
    return False


@hsettings(max_examples=max(8, hsettings.default.max_examples // 12), deadline=None,
           suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hostile_objects_never_stop_the_outage_next_to_them_nor_get_touched(server, tmp_path, data):
    allowed = hostile_cluster(server, data.draw)
    password = plant("fuzz-pushgateway-pa55word")
    kubeconfig = server.write_kubeconfig(str(tmp_path / "kubeconfig"))
    out, err = io.StringIO(), io.StringIO()
    before = len(server.requests)

    code = main(["--once"], {"KUBECONFIG": kubeconfig, "LOG_FORMAT": "json", "PASS_TIMEOUT_SECONDS": "20",
                             "FENCING": "networkfence", "NETWORK_FENCE_CLASS": "fence",
                             "OUT_OF_SERVICE_TAINT": "auto", "API_MAX_ATTEMPTS": "2",
                             "PUSHGATEWAY_URL": f"http://metrics:{password}@127.0.0.1:{free_port()}/"},
                stdout=out, stderr=err, sleep=lambda _seconds: None)

    said = out.getvalue() + err.getvalue()
    SESSION_LOG.add(said)
    assert code != EXIT_CRASH, said[-3000:]
    assert server.get("pods", "db-0", "default") is None, "the real outage is failed over"
    server.attacher.detach()  # the CSI attacher detaches what the pass deleted (its finalizer held it till then)
    assert server.get("volumeattachments", OUTAGE_ATTACHMENT) is None
    touched = [(r.verb, r.resource, r.namespace, r.name) for r in server.requests[before:]
               if r.could_change and not allowed_write(r, allowed)]
    assert touched == [], "nothing but what a right belief allows is written"
    assert password not in said
