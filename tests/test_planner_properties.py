"""Property tests on the pure planner: random snapshots never yield an unsafe action."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import Phase, find, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from rwo_failover import planner as decide
from rwo_failover import settings as config
from rwo_failover.model import (
    MULTI_ATTACH_MODES,
    Attachment,
    Claim,
    Lease,
    Node,
    Pod,
    Snapshot,
    Taint,
    TaintRecord,
    Volume,
)
from rwo_failover.settings.values import label_selector

# Hundreds of generated examples per property: `make quick` leaves them to `make test`.
pytestmark = pytest.mark.slow

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
BASE = config.load([], {})[1]
OURS_AT = "2026-11-21T11:00:00Z"
TAINTS = [Taint("node.cloudprovider.kubernetes.io/shutdown", "", "NoSchedule"),
          Taint("node.kubernetes.io/out-of-service", "nodeshutdown", "NoExecute"),  # a human's: no timeAdded
          Taint("node.kubernetes.io/unreachable", "", "NoExecute")]
OUR_TAINT = Taint("node.kubernetes.io/out-of-service", "nodeshutdown", "NoExecute", OURS_AT)
NODE_NAMES = [f"n{i}" for i in range(6)]
CLAIM_NAMES = [f"c{i}" for i in range(6)]
NAMESPACES = ["default", "prod", "kube-system"]
MODES = ["ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany", "ReadOnlyMany"]


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def _node(name: str, ready, since, taints, skew: float = 0.0) -> Node:
    """`since` seconds ago (server clock) Ready became `ready` and the status was written; the kubelet writes
    True and False with its own clock, `skew` seconds off, the node lifecycle controller writes Unknown."""
    written = None if since is None else ago(since)
    kubelet = ready in ("True", "False")
    return Node(name, tuple(taints), ready, None if written is None else written + timedelta(
        seconds=skew if kubelet else 0), status_written_at=written)


def _lease(name: str, age, duration, skew: float, version: str = "") -> Lease | None:
    """Renewed `age` seconds ago by the server's stamp; renewTime on the kubelet's clock."""
    if age is None:
        return None
    return Lease(name, ago(age) + timedelta(seconds=skew), duration, version or f"rv-{name}-{age}", ago(age))


shutdown_taints = st.lists(st.sampled_from(TAINTS[:2]), min_size=1, max_size=2, unique=True)
any_taints = st.lists(st.sampled_from(TAINTS), max_size=2, unique=True)
lease_age = st.one_of(st.none(), st.integers(-30, 900))
durations = st.sampled_from([40, 40, 40, 15, 120])
skews = st.sampled_from([0, 0, 0, 90, -120, 600, -600])  # how far each kubelet's clock runs off the server's


@st.composite
def node_and_lease(draw, name: str):
    """Archetypes keep the interesting cases common: most nodes healthy, some dead, some anything."""
    kind = draw(st.sampled_from(["healthy", "healthy", "dead", "dead", "random"]))
    skew = draw(skews)
    if kind == "healthy":
        taints = draw(st.sampled_from([[], [], [], [TAINTS[2]], [TAINTS[0]], [TAINTS[1]], [TAINTS[1]]]))
        back = draw(st.sampled_from(["no", "ours", "ours", "stale-annotation"]))
        if back == "ours":  # back from an outage, with the out-of-service taint we added
            taints = [t for t in taints if t.key != OUR_TAINT.key] + [OUR_TAINT]
        node = _node(name, "True", draw(st.integers(0, 900)), taints, skew)
        if back != "no":  # our provenance, for this Node object, before a reboot or not
            booted = draw(st.sampled_from(["boot-1", "boot-1", "boot-2", ""]))
            node = dataclasses.replace(node, oos_added_at=OURS_AT, uid=f"uid-{name}", boot_id="boot-2",
                                       taint_record=TaintRecord(name, f"uid-{name}", booted, "", OURS_AT,
                                                                name=f"rwo-taint-uid-{name}", version="1",
                                                                uid=f"cm-{name}"))
        return node, _lease(name, draw(st.integers(0, 60)), draw(durations), skew)
    if kind == "dead":
        taints = draw(shutdown_taints)
        node = _node(name, draw(st.sampled_from(["Unknown", "Unknown", "False"])),
                     draw(st.integers(0, 900) | st.just(900)), taints, skew)
        if draw(st.booleans()) and TAINTS[1] in taints:  # the out-of-service taint there is ours
            node = dataclasses.replace(node, taints=tuple(OUR_TAINT if t == TAINTS[1] else t for t in taints),
                                       oos_added_at=OURS_AT)
        age = draw(st.none() | st.integers(0, 900) | st.just(900))
        return node, _lease(name, age, draw(durations), skew)
    node = _node(name, draw(st.sampled_from(["True", "False", "Unknown", None])),
                 draw(st.one_of(st.none(), st.integers(-30, 900))), draw(any_taints), skew)
    return node, _lease(name, draw(lease_age), draw(durations), skew)


@st.composite
def pod_on(draw, i: int, nodes: list[str], claims: dict) -> Pod:
    namespace = draw(st.sampled_from(NAMESPACES))
    own = sorted(c.name for c in claims.values() if c.namespace == namespace) + ["missing"]
    return Pod(
        namespace, f"p{i}", f"uid-p{i}-{namespace}", draw(st.sampled_from(nodes)),
        draw(st.sampled_from([{}, {"app": "db"}, {"app": "web"}])),
        draw(st.sampled_from([None, "StatefulSet", "StatefulSet", "ReplicaSet", "ReplicaSet", "DaemonSet"])),
        draw(st.sampled_from([False] * 7 + [True])), draw(st.sampled_from([False] * 7 + [True])),
        draw(st.booleans()), draw(st.sampled_from(["Running", "Unknown", "Pending", "Failed"])),
        draw(st.sampled_from([None, "NodeLost"])), draw(st.sampled_from(["True", "False", "Unknown", None])),
        tuple(draw(st.lists(st.sampled_from(own), min_size=1, max_size=3, unique=True))),
        started_at=draw(st.sampled_from([ago(7200)] * 3 + [None])))  # None: no kubelet ever ran it


MODE_SETS = [{"ReadWriteOnce"}, {"ReadWriteOnce"}, {"ReadWriteOncePod"}, {"ReadWriteOnce", "ReadWriteMany"},
             {"ReadWriteMany"}, {"ReadOnlyMany"}, set()]
# A claim and, when it names one, its PV: the PV's modes, and whether the PV names the claim back (by uid
# too), vary on their own, so claims that name someone else's PV come up.
claims_st = st.builds(
    lambda ns, name, modes, bound, back, opt: (
        Claim(ns, name, f"uid-{ns}-{name}", f"pv-{ns}-{name}" if bound else "", bound, opt),
        Volume(f"pv-{ns}-{name}", f"{ns}/{name}", f"uid-{ns}-{name}" if back else "uid-other", frozenset(modes))),
    st.sampled_from(NAMESPACES), st.sampled_from(CLAIM_NAMES), st.sampled_from(MODE_SETS),
    st.sampled_from([True] * 5 + [False]), st.sampled_from([True] * 6 + [False]),
    st.sampled_from([False] * 7 + [True]))


@st.composite
def snapshots(draw):
    names = draw(st.lists(st.sampled_from(NODE_NAMES), min_size=2, max_size=6, unique=True))
    pairs = [draw(node_and_lease(name)) for name in names]
    nodes = tuple(node for node, _ in pairs)
    leases = {node.name: lease for node, lease in pairs}
    drawn = draw(st.lists(claims_st, min_size=6, max_size=24))
    claims = {c.key: c for c, _ in drawn}
    pvs = {v.name: v for c, v in drawn if claims[c.key] is c and c.volume}
    pods = {p.key: p for p in (draw(pod_on(i, names, claims)) for i in range(draw(st.integers(0, 14))))}
    # Attachments mostly point at PVs of the drawn claims, on any node, so "another node's attachment
    # of the same PV" and "another PV on the same node" both come up often.
    volumes = sorted({c.volume for c in claims.values() if c.volume}) + ["pv-unrelated"]
    placed = [(node, pv) for pv in volumes
              for node in draw(st.lists(st.sampled_from(names), max_size=2, unique=True))]
    # Mostly made long before any node went down; sometimes now, after (a tenant's pod had it made).
    atts = {f"va-{i}": Attachment(f"va-{i}", node, pv, deleting=draw(st.sampled_from([False] * 5 + [True])),
                                  created_at=draw(st.sampled_from([ago(30 * 86400)] * 4 + [NOW])),
                                  uid=f"uid-va-{i}")  # kube-apiserver sets one on every object
            for i, (node, pv) in enumerate(placed)}
    version = draw(st.sampled_from([None, (1, 27), (1, 28), (1, 36)]))
    records = {n.taint_record.name: n.taint_record for n in nodes if n.taint_record.name}  # observe binds them
    # How long this process has seen each NotReady node (observe/sightings.py), drawn here: mostly a day, sometimes
    # only 0 to 5 s, which may be short of MIN_NOT_READY_SECONDS (proven_down restates the rule the planner must keep).
    seen = {n.name: draw(st.sampled_from([86400.0, 86400.0, 86400.0, 0.0, 1.0, 5.0])) for n in nodes}
    return Snapshot(NOW, nodes, leases, tuple(pods.values()), claims, tuple(atts.values()), pvs, version,
                    taint_records=records, unknown_for=seen)


settings_st = st.builds(
    lambda fraction, max_nodes, max_pods, min_secs, states, exclude, selector, oos, recovery: dataclasses.replace(
        BASE, max_unhealthy_fraction=fraction, max_nodes_per_pass=max_nodes, max_pods_per_pass=max_pods,
        min_not_ready_seconds=min_secs, stuck_pod_states=frozenset(states),
        exclude_namespaces=frozenset(exclude), pod_selector=label_selector(selector),
        out_of_service_taint=oos, recovery_seconds=recovery),
    st.sampled_from([0.5, 1.0, 1.0, 1.0]), st.integers(1, 6) | st.just(6), st.sampled_from([1, 2, 3, 20, 20]),
    st.sampled_from([0, 60, 60, 300]),
    st.sets(st.sampled_from(config.STUCK_STATES), min_size=1) | st.just(set(config.STUCK_STATES)),
    st.sampled_from([set(), set(), {"kube-system"}, {"prod"}]),
    st.sampled_from(["", "", "app=db", "app notin (web)"]), st.sampled_from(config.OUT_OF_SERVICE_MODES),
    st.sampled_from([0, 60, 600]))


def proven_down(node: Node, lease, settings, seen_here: float = 0.0) -> bool:
    """An independent restatement of the rule, on server stamps and this process's own sighting of the NotReady
    (`seen_here` seconds, issue 35), to check the planner against."""
    if node.ready != "Unknown" or node.status_written_at is None:
        return False
    if seen_here < settings.min_not_ready_seconds:
        return False
    if lease is not None and lease.changed_at is None:
        return False
    if (NOW - node.status_written_at).total_seconds() - 1 < settings.min_not_ready_seconds:
        return False
    if lease is not None:
        silent = (NOW - lease.changed_at).total_seconds()
        if silent - 1 < max(settings.min_not_ready_seconds, lease.duration):
            return False
    return any(spec.matches(t.as_dict()) for spec in settings.shutdown_taints for t in node.taints)


def exclusive_volume(claim: Claim, snapshot) -> bool:
    """Bound both ways (uid too), to a PV a second node cannot attach."""
    pv = snapshot.volumes.get(claim.volume)
    return (pv is not None and claim.bound and pv.claim == claim.key and pv.claim_uid == claim.uid
            and not pv.access_modes & MULTI_ATTACH_MODES)


def protected(pod: Pod, snapshot, settings) -> bool:
    """A pod that a setting keeps from us, holding a claim not proven shareable. Namespace and selector
    settings do not cover DaemonSet pods; an opt-out covers every pod but a mirror pod."""
    if pod.mirror or not pod.claims:
        return False
    claims = [snapshot.claims.get(f"{pod.namespace}/{c}") for c in pod.claims]
    opted = pod.opted_out or any(c is not None and c.opted_out for c in claims)
    by_setting = opted or pod.controller_kind != "DaemonSet" and (
        pod.namespace in settings.exclude_namespaces or not settings.pod_selector.matches(pod.labels))
    shareable = [c for c in claims if c is not None and c.volume in snapshot.volumes
                 and c.bound and snapshot.volumes[c.volume].claim_uid == c.uid
                 and snapshot.volumes[c.volume].claim == c.key
                 and snapshot.volumes[c.volume].access_modes & MULTI_ATTACH_MODES]
    return by_setting and len(shareable) < len(pod.claims)


def apply(snapshot: Snapshot, plan: decide.Plan) -> Snapshot:
    gone_pods = {(a.namespace, a.name) for n in plan.nodes for a in n.pods}
    gone_atts = {a.name for n in plan.nodes for a in n.attachments}
    return dataclasses.replace(
        snapshot, pods=tuple(p for p in snapshot.pods if (p.namespace, p.name) not in gone_pods),
        attachments=tuple(a for a in snapshot.attachments if a.name not in gone_atts))


@hsettings(max_examples=400, deadline=None)
@given(snapshots(), settings_st)
def test_actions_only_on_proven_down_nodes_rwo_pods_and_their_own_attachments(snapshot, settings):
    plan = decide.plan(snapshot, settings)
    nodes = {n.name: n for n in snapshot.nodes}
    pods = {(p.namespace, p.name): p for p in snapshot.pods}
    for node_plan in plan.nodes:
        node = nodes[node_plan.verdict.node]
        assert proven_down(node, snapshot.leases.get(node.name), settings, snapshot.unknown_for.get(node.name, 0.0)), \
            node
        assert node.ready != "True"
        rwo_volumes = set()
        for action in node_plan.pods:
            pod = pods[(action.namespace, action.name)]
            assert pod.uid == action.uid and pod.node == node.name
            assert not pod.mirror and pod.controller_kind != "DaemonSet" and not pod.opted_out
            assert pod.phase not in ("Succeeded", "Failed"), "a completed pod is never deleted"
            assert pod.namespace not in settings.exclude_namespaces
            assert settings.pod_selector.matches(pod.labels)
            assert set(decide.stuck_states(pod)) & settings.stuck_pod_states
            claims = [snapshot.claims[f"{pod.namespace}/{c}"] for c in pod.claims
                      if f"{pod.namespace}/{c}" in snapshot.claims]
            assert not any(c.opted_out for c in claims)
            rwo = [c for c in claims if exclusive_volume(c, snapshot)]
            assert rwo, "a selected pod must mount a claim bound to an exclusive PV"
            rwo_volumes |= {c.volume for c in rwo}
        used_on_node = {f"{p.namespace}/{c}" for p in snapshot.pods if p.node == node.name
                        and (p.namespace, p.name) not in {(a.namespace, a.name) for a in node_plan.pods}
                        and p.phase not in ("Succeeded", "Failed") for c in p.claims}
        for att in node_plan.attachments:
            original = next(a for a in snapshot.attachments if a.name == att.name)
            assert original.node == node.name, "never another node's attachment"
            assert att.uid == original.uid != "", "its delete is preconditioned on the attachment judged"
            if att.after_pods:
                assert original.volume in rwo_volumes, "never an attachment of another PV"
            else:  # an orphan: its RWO claim is used by no pod left on this node
                claim = snapshot.claims[snapshot.volumes[original.volume].claim]
                assert exclusive_volume(claim, snapshot) and not claim.opted_out and claim.volume == original.volume
                assert claim.key not in used_on_node and not settings.pod_selector
                assert claim.namespace not in settings.exclude_namespaces


@hsettings(max_examples=400, deadline=None)
@given(snapshots(), settings_st)
def test_out_of_service_taint_is_added_and_removed_only_where_the_rules_allow(snapshot, settings):
    plan = decide.plan(snapshot, settings)
    nodes = {n.name: n for n in snapshot.nodes}
    for node_plan in plan.nodes:
        node = nodes[node_plan.verdict.node]
        if node_plan.add_taint:
            assert proven_down(node, snapshot.leases.get(node.name), settings,
                               snapshot.unknown_for.get(node.name, 0.0)) and not node.has_oos_taint
            assert node_plan.pods or node_plan.attachments, "the taint only ever comes with something to release"
            assert settings.out_of_service_taint == "always" or (
                settings.out_of_service_taint == "auto" and snapshot.server_version >= (1, 28))
            assert not any(protected(p, snapshot, settings) for p in snapshot.pods if p.node == node.name)
    for name in plan.untaint:
        node, lease = nodes[name], snapshot.leases.get(name)
        assert node.oos_added_at and node.ready == "True", "only our taint, only on a node that is back"
        assert OUR_TAINT in node.taints, "exactly our taint, with the timeAdded we recorded"
        assert not any(spec.matches(t.as_dict()) for spec in settings.shutdown_taints for t in node.taints
                       if t != OUR_TAINT), "no other shutdown taint"
        # Ready since: the kubelet's time, moved by the skew its Lease shows (server stamp vs renewTime).
        assert lease is not None and lease.changed_at is not None
        skew = (lease.renew_time - lease.changed_at).total_seconds()
        assert (NOW - node.ready_since).total_seconds() + skew - 1 >= settings.recovery_seconds
        assert (NOW - lease.changed_at).total_seconds() < lease.duration
        assert not any(p.deleting for p in snapshot.pods if p.node == name)
        assert not any(a.node == name for a in snapshot.attachments), "no attachment left on it"
        record = node.taint_record
        assert record.node_uid == node.uid and record.added_at == node.oos_added_at, "ours, for this Node object"
        assert record.boot_id and node.boot_id and record.boot_id != node.boot_id, "only after a reboot"
    assert not set(plan.untaint) & {n.verdict.node for n in plan.nodes}


@hsettings(max_examples=400, deadline=None)
@given(snapshots(), settings_st)
def test_caps_hold_or_the_plan_refuses(snapshot, settings):
    plan = decide.plan(snapshot, settings)
    assert plan.pod_count <= settings.max_pods_per_pass, "a pass never deletes more pods than the cap"
    if plan.refusal is None:
        assert len(plan.busy_nodes) <= settings.max_nodes_per_pass
        # Proven down (or down by the server's stamps, not yet seen here so long) with nothing to release: they
        # count neither way, and only they.
        idle = len(plan.left_out)
        assert plan.left_out <= {n.verdict.node for n in plan.nodes if not n.counted} | \
            {v.node for v in plan.verdicts if v.sighting_pending}
        assert plan.not_ready - idle <= settings.max_unhealthy_fraction * max(plan.total_nodes - idle, 1)
    else:
        with pytest.raises(decide.UnsafePlan):
            plan.raise_if_unsafe()


@hsettings(max_examples=400, deadline=None)
@given(snapshots(), settings_st)
def test_planning_again_after_the_actions_yields_nothing(snapshot, settings):
    plan = decide.plan(snapshot, settings)
    if plan.refusal:
        return
    # Pods the cap leaves for later passes are taken by those passes, each one taking at least one.
    for _ in range(len(snapshot.pods) + 1):
        snapshot = apply(snapshot, plan)
        plan = decide.plan(snapshot, settings)
        if not plan.deferred:
            break
        assert plan.pod_count > 0, "a pass that defers pods takes some"
    again = decide.plan(apply(snapshot, plan), settings)
    assert again.pod_count == 0 and again.attachment_count == 0


@hsettings(max_examples=200, deadline=None)
@given(snapshots(), settings_st)
def test_planner_is_deterministic(snapshot, settings):
    shuffled = dataclasses.replace(snapshot, nodes=snapshot.nodes[::-1], pods=snapshot.pods[::-1],
                                   attachments=snapshot.attachments[::-1])
    assert decide.plan(snapshot, settings) == decide.plan(shuffled, settings)


@pytest.mark.parametrize("what, reached", [
    ("a pod deletion", lambda p: p.pod_count > 0),
    ("an attachment deletion", lambda p: p.attachment_count > 0),
    ("an attachment kept for a pod left in place", lambda p: any(s.kind == "volumeattachment" for s in p.skips)),
    ("an orphaned attachment released", lambda p: any(not a.after_pods for n in p.nodes for a in n.attachments)),
    ("a split-brain node beside an action", lambda p: p.split_brain and p.pod_count > 0),
    ("pods left for a later pass by the cap", lambda p: bool(p.deferred) and p.pod_count > 0),
    ("an out-of-service taint added", lambda p: any(n.add_taint for n in p.nodes)),
    ("our out-of-service taint removed", lambda p: bool(p.untaint)),
    ("our out-of-service taint held back by the outage's leftovers",
     lambda p: any("terminating" in s.reason or "are on the node" in s.reason for s in p.skips)),
    ("our out-of-service taint kept for a human: no reboot", lambda p: any("without rebooting" in why
                                                                            for _, why in p.taint_kept)),
    ("a stale taint record dropped", lambda p: bool(p.stale_records)),
    ("a down node with nothing to do beside an action", lambda p: p.pod_count and len(p.busy_nodes) < len(p.nodes)),
])
def test_generator_reaches_the_interesting_cases(what, reached):
    # Guards the properties above against going vacuous: each kind of plan must be reachable.
    find(st.tuples(snapshots(), settings_st), lambda pair: bool(reached(decide.plan(*pair))),
         settings=hsettings(max_examples=3000, deadline=None, database=None, phases=[Phase.generate]))


def at(snapshot: Snapshot, moment: datetime) -> Snapshot:
    """The same cluster judged at `moment`: this process has also seen each NotReady node that much longer."""
    passed = (moment - snapshot.now).total_seconds()
    return dataclasses.replace(snapshot, now=moment,
                               unknown_for={k: v + passed for k, v in snapshot.unknown_for.items()})


@given(snapshots(), settings_st)
@hsettings(max_examples=150, deadline=None)
def test_a_verdict_changes_by_time_exactly_at_its_changes_at(snapshot, settings):
    """What continuous mode wakes up for: `changes_at` is the moment the verdict changes with nothing but time
    passing. A second before it the state is the same; at it, another; without it, the state never changes."""
    def state_at(moment: datetime) -> dict[str, decide.NodeState]:
        later = at(snapshot, moment)
        return {v.node: v.state for v in decide.judge_nodes(later, settings)}

    for verdict in decide.judge_nodes(snapshot, settings):
        if verdict.changes_at is None:
            assert state_at(NOW + timedelta(days=30)).get(verdict.node) is verdict.state, verdict
            continue
        assert verdict.changes_at > NOW, verdict
        assert state_at(verdict.changes_at - timedelta(seconds=1)).get(verdict.node) is verdict.state, verdict
        assert state_at(verdict.changes_at).get(verdict.node) is not verdict.state, verdict


def _shape(plan: decide.Plan) -> tuple:
    """What a plan decides, without the ages in its reasons."""
    return (tuple((v.node, v.state) for v in plan.verdicts),
            tuple((n.verdict.node, n.pods, n.attachments, n.add_taint, n.fence) for n in plan.nodes),
            plan.refusal.kind if plan.refusal else None, plan.untaint, plan.stale_records, plan.unfence,
            tuple((r.claim.key, r.state) for r in plan.recovery))


@given(snapshots(), settings_st, st.floats(0.001, 0.999))
@hsettings(max_examples=150, deadline=None)
def test_nothing_the_plan_decides_changes_before_its_wake_at(snapshot, settings, fraction):
    """Continuous mode sleeps until `Plan.wake_at` unless the cluster changes: a decision that time alone
    would change earlier would be taken late."""
    plan = decide.plan(snapshot, settings)
    until = plan.wake_at or NOW + timedelta(days=30)
    assert until > NOW
    moment = NOW + (until - NOW) * fraction
    assert _shape(decide.plan(at(snapshot, moment), settings)) == _shape(plan)


def _kubelet_clocks_off_by(snapshot: Snapshot, skew: float) -> Snapshot:
    """The same cluster, every kubelet's clock `skew` seconds further off: renewTime and the kubelet's own
    condition times move; no server stamp does."""
    shift = timedelta(seconds=skew)
    nodes = tuple(dataclasses.replace(n, ready_since=n.ready_since + shift)
                  if n.ready in ("True", "False") and n.ready_since else n for n in snapshot.nodes)
    leases = {name: dataclasses.replace(lease, renew_time=lease.renew_time + shift)
              if lease is not None and lease.renew_time else lease for name, lease in snapshot.leases.items()}
    return dataclasses.replace(snapshot, nodes=nodes, leases=leases)


@given(snapshots(), settings_st, st.integers(-600, 600))
@hsettings(max_examples=300, deadline=None)
def test_no_kubelet_clock_changes_any_decision(snapshot, settings, skew):
    """A node's clock may run ±10 min off: nothing the plan decides may move with it."""
    assert _shape(decide.plan(_kubelet_clocks_off_by(snapshot, skew), settings)) == \
        _shape(decide.plan(snapshot, settings))


@given(snapshots(), settings_st, st.integers(-600, 600), st.integers(0, 60), st.sampled_from([15, 40, 120]))
@hsettings(max_examples=300, deadline=None)
def test_a_lease_that_changes_while_the_pass_watches_is_never_down(snapshot, settings, skew, later, duration):
    """Whatever the renewal looks like (a renewTime from a clock ±10 min off, a server stamp up to a minute
    after the plan, any duration, or a Lease appearing where there was none), a node whose Lease changed
    between the plan's read and the live re-check is never down."""
    nodes = {n.name: n for n in snapshot.nodes}
    for verdict in decide.judge_nodes(snapshot, settings):
        name = verdict.node
        before = snapshot.leases.get(name)
        renewed = Lease(name, NOW + timedelta(seconds=later + skew), duration,
                        f"{before.version if before else ''}-renewed", NOW + timedelta(seconds=later))
        moment = NOW + timedelta(seconds=later + 1)
        taint = decide.shutdown_taint(nodes[name], settings.shutdown_taints)
        seen = before.version if before is not None else ""
        again = decide.judge_tainted_node(nodes[name], renewed, taint, settings=settings, now=moment, seen=seen) \
            if taint else decide.judge_ours(nodes[name], renewed, settings, now=moment, seen=seen)
        assert again.state is not decide.NodeState.DOWN, again


@given(snapshots(), settings_st, st.sampled_from([None, 0, 10, 60, 300]))
@hsettings(max_examples=300, deadline=None)
def test_fencing_never_makes_a_node_wait_longer(snapshot, settings, fenced_min):
    """A node proven down without fencing is proven down with it, whatever FENCED_MIN_NOT_READY_SECONDS says:
    fencing adds a confirmation before acting, never a longer wait (issue 20)."""
    fenced = dataclasses.replace(settings, fencing="networkfence", network_fence_class="c",
                                 fenced_min_not_ready_seconds=fenced_min)
    down = {v.node for v in decide.judge_nodes(snapshot, settings) if v.state is decide.NodeState.DOWN}
    assert down <= {v.node for v in decide.judge_nodes(snapshot, fenced) if v.state is decide.NodeState.DOWN}
