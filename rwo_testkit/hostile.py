"""Hypothesis strategies for hostile input: arbitrary, type-confused and truncated JSON for every object kind
a pass reads, and for the fence webhook's answers. Test-only (it needs the dev venv's hypothesis).

Each kind starts from a realistic object (the builders in fake_cluster) and is made hostile in one of the ways
a tenant, a buggy controller, a proxy or a bad upgrade could: one field's JSON type confused, a key dropped,
a list or an object cut short, a tricky string where a time or a name belongs, several of these at once, or
nothing realistic left at all.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from rwo_failover.model import OPT_OUT_ANNOTATION, RECOVERY_ANNOTATION

from . import fake_cluster as fc

Path = tuple[Any, ...]

# Strings a careless parser trips on: times that are not RFC 3339, numbers as text, huge and empty things.
TRICKY_TEXT = ["", " ", "true", "false", "null", "0", "-1", "1e999", "NaN", "Z", "2026-11-21", "2026-11-21T10:00:00",
               "2026-13-45T99:99:99Z", "2026-11-21T10:00:00+99:00", "not a time", "\x00", "ReadWriteMany",
               "ReadWriteOnce", "Fenced", "Unfenced", "Succeeded", "a" * 300, "名前", "../../etc", "%s%n{}"]
# No infinities: `Infinity` is not JSON (RFC 8259), and the API server (Go's encoding/json) never writes it.
scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False, allow_infinity=False)
           | st.text(max_size=12) | st.sampled_from(TRICKY_TEXT))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=10)


def paths(obj: Any, prefix: Path = ()) -> list[Path]:
    """Every place in a JSON document, the root excluded."""
    found: list[Path] = []
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in items:
        found.append(prefix + (key,))
        found.extend(paths(value, prefix + (key,)))
    return found


def _parent(obj: Any, path: Path) -> Any:
    for key in path[:-1]:
        obj = obj[key]
    return obj


def put(obj: Any, path: Path, value: Any) -> None:
    """Set the value at `path` (whose parents exist) to `value`, in place."""
    _parent(obj, path)[path[-1]] = value


def json_kind(value: Any) -> str:
    """The JSON type of a value; int and float are both numbers, as JSON has it."""
    if value is None or isinstance(value, bool):
        return repr(value) if value is None else "bool"
    return {int: "number", float: "number", str: "string", list: "array", dict: "object"}[type(value)]


@dataclass(frozen=True)
class Mutation:
    """What was done to the valid object: `confused` holds the paths whose JSON type changed."""

    how: str
    confused: tuple[Path, ...] = ()


@st.composite
def hostile(draw: Callable, valid: dict, protect: tuple[str, ...] = ()) -> tuple[Any, Mutation]:
    """(hostile object, how it was made) from a valid object. The top-level keys in `protect` are left as
    they are (what the API server itself guarantees: kind, apiVersion, metadata), and then the object stays
    an object."""
    ways = ["confuse", "confuse", "confuse", "drop", "truncate", "tricky", "several"]
    how = draw(st.sampled_from(ways + ([] if protect else ["arbitrary"])))
    if how == "arbitrary":
        return draw(json_values), Mutation(how)
    obj = copy.deepcopy(valid)
    confused: list[Path] = []
    for _ in range(draw(st.integers(2, 4)) if how == "several" else 1):
        step = how if how != "several" else draw(st.sampled_from(ways[:-1]))
        spots = [p for p in paths(obj) if p[0] not in protect]
        if not spots:
            break
        path = draw(st.sampled_from(spots))
        parent = _parent(obj, path)
        if step in ("confuse", "tricky"):
            old = parent[path[-1]]
            new = draw(st.sampled_from(TRICKY_TEXT) if step == "tricky" else json_values)
            parent[path[-1]] = new
            if new is not None and json_kind(new) != json_kind(old):
                confused.append(path)
        elif step == "drop":
            del parent[path[-1]]
        else:  # truncate: keep the first few entries of an object or array
            target = parent[path[-1]]
            if isinstance(target, (dict, list)):
                keep = draw(st.integers(0, max(0, len(target) - 1)))
                parent[path[-1]] = dict(list(target.items())[:keep]) if isinstance(target, dict) else target[:keep]
    return obj, Mutation(how, tuple(confused))


# --- realistic objects of every kind a pass reads ---------------------------------------------------------

def network_fence(node: str = "dead", cidrs: list | None = None, result: str = "Succeeded") -> dict:
    return {"apiVersion": "csiaddons.openshift.io/v1alpha1", "kind": "NetworkFence",
            "metadata": {"name": node, "generation": 1, "labels": {"app.kubernetes.io/managed-by": "rwo-failover"}},
            "spec": {"fenceState": "Fenced", "networkFenceClassName": "fence", "cidrs": cidrs or ["10.0.0.1/32"]},
            "status": {"result": result, "message": "fencing operation successful", "conditions": [
                {"type": "Fenced", "status": "True", "reason": result, "observedGeneration": 1,
                 "lastTransitionTime": fc.stamp(0)}]}}


def untrusted_fence(node: str, ours: bool) -> dict:
    """A NetworkFence for `node` that answered Succeeded, and that no mutation outside its metadata can make
    trustworthy: not ours (the label is someone else's), or ours but fencing another address (no mutation
    writes the node's own address). A pass that acts on the node behind it believed what it must not."""
    fence = network_fence(node, ["192.0.2.1/32"] if ours else [f"{fc.internal_ip(node)}/32"])
    if not ours:
        fence["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "someone-else"}
    return fence


def event(node: str = "alive", reason: str = "ShutdownTaintOnLiveNode") -> dict:
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{node}.rwo-{reason.lower()}", "namespace": "default", "resourceVersion": "7"},
            "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node}, "type": "Warning",
            "reason": reason, "message": "tainted for shutdown but still heartbeating", "count": 3,
            "firstTimestamp": fc.stamp(7200), "lastTimestamp": fc.stamp(3600), "source": {"component": "rwo-failover"}}


def recovery_record() -> dict:
    return {"pod": "db-0", "uid": "3f1c9a52-0000-4000-8000-000000000001", "node": "dead",
            "controller": "StatefulSet/db", "notReadySince": fc.stamp(900), "deletedAt": fc.stamp(600),
            "claim": "default/data-db-0", "claimUID": "3f1c9a52-0000-4000-8000-000000000002",
            "volume": "pv-default-data-db-0"}


def claim_with_annotations() -> dict:
    return fc.claim("data-db-0", annotations={OPT_OUT_ANNOTATION: "false",
                                              RECOVERY_ANNOTATION: json.dumps(recovery_record())})


BUILDERS: dict[str, Callable[[], Any]] = {
    "node": lambda: fc.node("dead", ready="Unknown", since=600, taints=[fc.SHUTDOWN, fc.our_taint()]),
    "lease": lambda: fc.lease("dead", 640),
    "pod": lambda: fc.pod("db-0", "dead", claims=["data-db-0"], ephemeral=["scratch"], terminating=True,
                          annotations={OPT_OUT_ANNOTATION: "false"}),
    "claim": claim_with_annotations,
    "volume": lambda: fc.volume("pv-default-data-db-0", "data-db-0", claim_uid="3f1c9a52"),
    "attachment": lambda: fc.attachment("pv-default-data-db-0", "dead"),
    "networkfence": network_fence,
    "event": event,
    "record": recovery_record,
}
KINDS = tuple(BUILDERS)
# Built once, so an example replays the same (hostile copies are made of them, never changes to them).
VALID: dict[str, Any] = {kind: build() for kind, build in BUILDERS.items()}


def of_kind(kind: str) -> st.SearchStrategy:
    """(hostile object, Mutation) of one kind, made from VALID[kind]."""
    return hostile(VALID[kind])


def record_texts() -> st.SearchStrategy:
    """The recovery record as stored: JSON text, possibly cut short, possibly not JSON at all."""
    as_json = hostile(recovery_record()).map(lambda pair: json.dumps(pair[0]))
    cut = st.tuples(as_json, st.integers(0, 400)).map(lambda pair: pair[0][: pair[1]])
    return as_json | cut | st.text(max_size=40) | st.just("x" * 70000)


def webhook_answers(node: str, uid: str) -> st.SearchStrategy:
    """(status, body bytes): the contract's yes made hostile, other statuses, and bytes that are not JSON."""
    yes = {"fenced": True, "node": node, "uid": uid}
    bodies = hostile(yes).map(lambda pair: json.dumps(pair[0]).encode()) | st.binary(max_size=40) | \
        st.just(json.dumps(yes).encode())
    statuses = st.sampled_from([200, 200, 200, 201, 204, 299, 300, 302, 307, 400, 403, 404, 429, 500, 503])
    return st.tuples(statuses, bodies)


# --- valid but adversarial: what the API server accepts from any tenant (issue 26) ---------------------------

def _subdomain(text: str) -> str:
    """`text` made a DNS subdomain as the API server checks names: a run of separators holding a "." becomes
    one ".", and none at either end (no length limit per label: IsDNS1123Subdomain has none)."""
    return re.sub(r"[-.]*\.[-.]*", ".", text).strip("-.") or "a"


# Names of up to 253 characters with a "-" or "." wherever a cut may fall (an Event name keeps 200 of them).
EDGE_NAMES = ["a" * 253, "a" * 199 + "-" + "b" * 53, "a" * 199 + "." + "b" * 53, "a" * 200 + "-b", "x"]
dns_subdomains = st.text(alphabet="az09-.", min_size=1, max_size=253).map(_subdomain) | st.sampled_from(EDGE_NAMES)
dns_labels = st.text(alphabet="az09-", min_size=1, max_size=63).map(lambda text: text.strip("-") or "a")
# An ownerReference's kind and name: the API server checks only that they are not empty, then the whole
# object's size (1.5 MiB). Any text, huge ones, names with "/" and "~", and the kinds that mean something to us.
owner_kinds = st.sampled_from(["StatefulSet", "ReplicaSet", "Job", "DaemonSet", "StatefulSet/x", "~"]) | st.text(
    min_size=1, max_size=80)
owner_names = (dns_subdomains | st.text(min_size=1, max_size=400) | st.integers(254, 5000).map(lambda n: "r" * n)
               | st.sampled_from(["a/b", "../../x", "~", "n" * 404, "名前" * 200]))
finalizers = st.lists(st.sampled_from(["kubernetes.io/pvc-protection", "example.com/hold", "x/" + "f" * 200]),
                      max_size=2, unique=True)
labels = st.dictionaries(st.sampled_from(["app", "rwo-failover.io/opt-out", "statefulset.kubernetes.io/pod-name"]),
                         dns_labels, max_size=3)


@st.composite
def tenant_pod(draw: Callable, name: str, node: str, *, namespace: str, claim: str) -> dict:
    """A pod a tenant may create: bound to `node` by spec.nodeName, mounting `claim`, with any ownerReference,
    labels and finalizers, deleted (Terminating) or not."""
    pod = fc.pod(name, node, namespace=namespace, claims=[claim], owner=None,
                 terminating=draw(st.booleans()), phase=draw(st.sampled_from(["Pending", "Running", "Unknown"])),
                 labels=draw(labels), kubelet_ran=False)  # made after its node went down: no kubelet ran it
    if draw(st.booleans()):
        pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": draw(owner_kinds),
                                               "name": draw(owner_names), "uid": "u-" + name,
                                               "controller": draw(st.booleans())}]
    pod["metadata"]["finalizers"] = draw(finalizers)
    return pod
