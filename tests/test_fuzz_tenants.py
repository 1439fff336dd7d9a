"""The fuzz tier, continued (issue 26): objects the API server accepts from any tenant, valid but adversarial,
aimed at the brakes' arithmetic and at the records and names we write from them (strategies in
rwo_testkit/hostile.py; the hostile-JSON half of the tier is tests/test_fuzz.py).

Properties:
- whatever a tenant's pod holds (an ownerReference of any kind and name, labels, finalizers), the recovery record
  we would write for it parses back to what we wrote, and a later pass settles it: recovered when a replacement
  of the same controller runs, reported RWOVolumeNotRecovered when the timeout passes;
- every Event we would write about an object the API server holds is named by a DNS subdomain;
- in whole passes over the fixture API server, tenant pods naming stopped nodes (any number, any metadata) never
  trip a brake and never keep the real outage beside them from failing over; a real outage past
  MAX_NODES_PER_PASS still trips it.

`make test` runs the "fast" profile; CI sets HYPOTHESIS_PROFILE=ci (conftest.py).
"""

from __future__ import annotations

import dataclasses
import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from conftest import SESSION_LOG, SESSION_REQUESTS, WATCHED_FOR, watched
from helpers import attached
from hypothesis import HealthCheck, event, example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from rwo_failover import planner
from rwo_failover import settings as config
from rwo_failover.act.events import build_event, repeated_name
from rwo_failover.act.recovery import records_for
from rwo_failover.model import Attachment, Claim, Lease, Node, Pod, RecoveryEntry, Snapshot, Volume, is_name
from rwo_failover.planner.recovery import Record, controller_ref, judge_all
from rwo_failover.run.cli import main
from rwo_failover.run.exitcodes import EXIT_CRASH, EXIT_REFUSED
from rwo_testkit import fake_cluster as fc
from rwo_testkit import hostile as h
from rwo_testkit.fake_apiserver import FakeApiServer

SETTINGS = config.load([], {})[1]


# --- round trips through our own records ---------------------------------------------------------------------

def _snapshot(pod: dict, namespace: str, claim: str, node: str) -> Snapshot:
    """One pass's view of an outage on `node` holding the tenant's pod, read as a pass reads it."""
    claim_obj = fc.claim(claim, namespace, volume="pv-1")
    claim_obj["metadata"]["uid"] = "c-uid-1"
    pv = fc.volume("pv-1", claim, namespace, claim_uid="c-uid-1")
    pod["metadata"]["uid"] = "p-uid-1"
    return Snapshot(datetime.now(UTC), (Node.from_json(fc.node(node, "Unknown", 600, taints=[fc.SHUTDOWN])),
                                                 Node.from_json(fc.node("w1"))),
                    {node: Lease.from_json(fc.lease(node, 640))}, (Pod.from_json(pod),),
                    {f"{namespace}/{claim}": Claim.from_json(claim_obj)},
                    (Attachment.from_json(fc.attachment("pv-1", node)),), {"pv-1": Volume.from_json(pv)},
                    unknown_for={node: WATCHED_FOR})  # seen NotReady here as long as by the server's stamps


@example(name="a" * 253, namespace="a" * 63, claim="c" * 253, node="n" * 253, kind="K" * 64, owner="o" * 253,
         data=None).via("a kind bounded beside the longest plain name")
@example(name="x", namespace="t", claim="c", node="n", kind="k" * 64, owner="r" * 404, data=None).via(
    "issue 26: a 404-character owner")
@given(name=h.dns_subdomains, namespace=h.dns_labels, claim=h.dns_subdomains, node=h.dns_subdomains,
       kind=h.owner_kinds, owner=h.owner_names, data=st.data())
def test_any_pod_the_api_server_accepts_makes_a_record_we_read_back_and_settle(name, namespace, claim, node, kind,
                                                                               owner, data):
    pod = fc.pod(name, node, namespace=namespace, claims=[claim], owner=None, terminating=True)
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": kind, "name": owner, "uid": "o-1",
                                           "controller": True}]
    snapshot = _snapshot(pod, namespace, claim, node)
    plan = planner.plan(snapshot, SETTINGS)
    if kind == "DaemonSet":  # never ours to free
        assert plan.pod_count == 0
        return
    [node_plan] = plan.nodes
    [action] = node_plan.pods
    [(record_name, record)] = records_for(action, node_plan.verdict.not_ready_since, snapshot.now)
    text = record.to_json()
    read = Record.parse(text)  # never BadObject: what we write, we read
    assert read == dataclasses.replace(record, deleted_at=record.deleted_at.replace(microsecond=0))
    assert is_name(record_name) and len(text) <= 4096
    event(f"controller {'bounded' if '~' in read.controller else 'as written'}")

    later = dataclasses.replace(snapshot, pods=(), recovery_records=(RecoveryEntry(record_name, text),))
    replace = data.draw(st.booleans()) if data is not None else False
    if replace:  # a replacement of the same controller, Running and Ready on another node, the volume there
        again = fc.pod(name if kind == "StatefulSet" else "other-0", "w1", namespace=namespace, claims=[claim],
                       owner=None, ready="True")
        again["metadata"]["ownerReferences"] = pod["metadata"]["ownerReferences"]
        later = dataclasses.replace(later, now=read.deleted_at + timedelta(seconds=30),
                                    recovery_pods=(Pod.from_json(again),),
                                    attachments=(Attachment.from_json(fc.attachment("pv-1", "w1")),))
    else:
        later = dataclasses.replace(later, now=read.deleted_at + timedelta(
            seconds=SETTINGS.recovery_timeout_seconds + 1))
    [verdict] = judge_all(later, SETTINGS)
    assert verdict.state == ("recovered" if replace else "not-recovered"), verdict
    assert verdict.claim is not None and verdict.claim.uid == "c-uid-1"


@given(kind=h.owner_kinds | st.text(min_size=1, max_size=300), name=h.owner_names,
       other=h.owner_names | h.owner_kinds)
def test_a_controller_is_bounded_one_way_and_named_apart(kind, name, other):
    """Within the record's limit, one "/" between kind and name (the kind is what says StatefulSet), and two
    controllers that differ are named apart."""
    ref = controller_ref(kind, name)
    assert len(ref) <= 320 and ref.count("/") == 1 and ref.isascii() and ref.isprintable()
    assert (ref.partition("/")[0] == "StatefulSet") == (kind == "StatefulSet")
    assert controller_ref(kind, other) != ref or other == name


@given(name=h.dns_subdomains, node=h.dns_subdomains, namespace=h.dns_labels,
       reason=st.sampled_from(["RWOVolumesReleased", "NotCountedByBrakes", "ShutdownTaintOnLiveNode"]))
def test_every_event_name_we_write_is_a_dns_subdomain(name, node, namespace, reason):
    """An Event is named after its object, cut to 200 characters: a 253-character pod name with "-" or "." there
    once made "<...->.<digest>". kube-apiserver v1.36.2 accepts that for a core/v1 Event (it checks no Event
    name), but events.k8s.io/v1 and every other kind we create would refuse it: ours are DNS subdomains."""
    for kind, involved, scoped in (("Pod", name, False), ("PersistentVolumeClaim", name, False), ("Node", node, True)):
        made = build_event(namespace, kind, involved, uid="uid-1", event_type="Normal", reason=reason, message="m",
                           stamp="2026-11-21T12:00:00Z", instance="host", cluster_scoped=scoped)
        assert is_name(made["metadata"]["name"]), made["metadata"]["name"]
    assert is_name(repeated_name(node, reason)) and is_name(repeated_name(node, reason, "0123abcd"))
    assert is_name(repeated_name(node, reason) + "-" + "x2x4q"), "generateName adds a suffix"


# --- whole passes: tenant pods aimed at the brakes' arithmetic -------------------------------------------------

@pytest.fixture(scope="module")
def server():
    with FakeApiServer() as api:
        api.listeners.append(SESSION_REQUESTS.append)
        yield api


def tenant_cluster(api: FakeApiServer, draw) -> tuple[int, int]:
    """`live` healthy nodes; "dead" and `extra` more, each a real outage (a stuck pod, its RWO volume attached
    there); stopped nodes (proven down, nothing attached); and tenant pods of any metadata naming any of them,
    all mounting one bound RWO claim never attached anywhere. Returns (live, extra)."""
    api.reset()
    live, extra, stopped = draw(st.integers(1, 6)), draw(st.integers(0, 6)), draw(st.integers(0, 8))
    for i in range(live):
        fc.live_node(api, f"w{i}")
    for node in ["dead"] + [f"dead-{i}" for i in range(extra)]:
        fc.dead_node(api, node)
        fc.add_volume(api, f"data-{node}", attached_to=node)
        api.add(fc.pod(f"db-{node}", node, claims=[f"data-{node}"], terminating=True))
    for i in range(stopped):
        fc.dead_node(api, f"stopped-{i}")
    fc.add_volume(api, "junk", namespace="tenant")
    targets = [f"stopped-{i}" for i in range(stopped)] + ["dead", "w0"]
    for i, node in enumerate(draw(st.lists(st.sampled_from(targets), max_size=24))):
        api.add(draw(h.tenant_pod(f"junk-{i}", node, namespace="tenant", claim="junk")))
    event(f"{stopped} stopped nodes, {extra + 1} real outages, {live} live nodes")
    return live, extra


@hsettings(max_examples=max(8, hsettings.default.max_examples // 12), deadline=None,
           suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_tenant_pods_never_move_a_brake_and_real_outages_still_do(server, tmp_path, data):
    live, extra = tenant_cluster(server, data.draw)
    kubeconfig = server.write_kubeconfig(str(tmp_path / "kubeconfig"))
    out, err = io.StringIO(), io.StringIO()
    before = len(server.requests)

    code = main(["--once"], {"KUBECONFIG": kubeconfig, "LOG_FORMAT": "json", "PASS_TIMEOUT_SECONDS": "20",
                             "API_MAX_ATTEMPTS": "2", "ONCE_WAIT_SECONDS": "0"},
                stdout=out, stderr=err, sleep=lambda _s: None, sightings=watched())

    said = out.getvalue() + err.getvalue()
    SESSION_LOG.add(said)
    assert code != EXIT_CRASH, said[-3000:]
    # What the brakes see is what no tenant wrote: the real outages, beside the live nodes.
    down = 1 + extra
    fraction = down / (live + down) > SETTINGS.max_unhealthy_fraction
    expected = "unhealthy-fraction" if fraction else "nodes-per-pass" if down > SETTINGS.max_nodes_per_pass else ""
    [summary] = [json.loads(line) for line in out.getvalue().splitlines() if '"pass finished"' in line]
    assert summary["brake"] == expected, summary["refusal"]
    if expected:
        assert code == EXIT_REFUSED and not [r for r in server.requests[before:] if r.verb == "delete"]
    else:
        assert code != EXIT_REFUSED
        assert server.get("pods", "db-dead", "default") is None, "the real outage is failed over"
        assert not [a for a in attached(server) if a["spec"]["nodeName"].startswith("dead")]
