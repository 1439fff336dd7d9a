"""A stateful property test (issue 17): the world moves between every API call of a real pass.

A pass runs in a thread against the fixture; a gate in the fixture holds each of its requests until the state
machine releases it, and the world's moves happen only while a request is held: a kubelet renewing its Lease
or coming back, the shutdown taint removed, a StatefulSet pod replaced, an answer lost, time passing for the
leader election, a standby taking the leader Lease. The invariant is checked as each write arrives:
- no destructive write (a pod or VolumeAttachment delete, a NetworkFence, the out-of-service taint) arrives
  on a node the world has shown alive: a kubelet that renews or comes back always changes its Lease, which
  the pass reads last before every such write, so nothing the world did before the write is invisible;
- none arrives on a node whose shutdown taint the pass has seen removed (it read the node after);
- no write at all comes from this replica once a standby leads.
The world moves only while a request is held, so between the pass's last read and its write it stands still:
a write that arrives was sent after everything the world did. Races like a node back between two attachment
deletes, or a leader deposed mid-pass, are what it exists to find.
"""

from __future__ import annotations

import io
import os
import threading

from hypothesis import HealthCheck
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from rwo_failover import settings as config
from rwo_failover.kube import Api, load_api_client
from rwo_failover.kube.leader import LeaderElector
from rwo_failover.model import OUT_OF_SERVICE_KEY
from rwo_failover.run import logs
from rwo_failover.run.exitcodes import EXIT_CRASH
from rwo_failover.run.runner import run_pass
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import FakeApiServer, Fault, Request

DEAD = ("dead-a", "dead-b")
LEASE_SECONDS = 15
ELECTION = "rwo-failover"
WRITES = ("POST", "PUT", "PATCH", "DELETE")


class Gate:
    """Holds each request of the pass until released; lets the leader election's own requests through."""

    def __init__(self, on_arrival, on_served) -> None:
        self.cv = threading.Condition()
        self.held: Request | None = None
        self.released = 0
        self.open = False
        self.on_arrival, self.on_served = on_arrival, on_served

    def hook(self, req: Request) -> None:
        if req.namespace == ELECTION:
            return None
        with self.cv:
            self.on_arrival(req)
            if self.open or not self.holds(req):
                return None
            self.held, ticket = req, self.released
            self.cv.notify_all()
            self.cv.wait_for(lambda: self.open or self.released != ticket, timeout=30)
            self.on_served(req)  # served now, after every move the world made while it was held
        return None

    @staticmethod
    def holds(req: Request) -> bool:
        """Where the world's moves matter: every read of a node or a Lease (the plan's and each re-check), and
        every write. Lists pass, to keep a pass within the steps of one example."""
        return req.method in WRITES or (req.verb == "get" and req.resource in ("nodes", "leases"))

    def wait_held(self, done: threading.Event) -> bool:
        with self.cv:
            return self.cv.wait_for(lambda: self.held is not None or done.is_set(), timeout=10) and \
                self.held is not None

    def release(self) -> None:
        """Let the held request through; the next wait_held waits for the pass's next request."""
        with self.cv:
            self.held = None
            self.released += 1
            self.cv.notify_all()

    def release_all(self) -> None:
        with self.cv:
            self.open = True
            self.cv.notify_all()


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class PassAgainstTheWorld(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.api = FakeApiServer().start()
        for i in range(3):
            fc.live_node(self.api, f"w{i}")
        for node in DEAD:
            fc.dead_node(self.api, node)
            for i in range(2):
                fc.add_volume(self.api, f"data-{node}-{i}", attached_to=node)
                self.api.add(fc.pod(f"{node}-db-{i}", node, claims=[f"data-{node}-{i}"], terminating=True))
        self.alive: set[str] = set()
        self.untainted: set[str] = set()  # shutdown taint removed by the world
        self.seen_untainted: set[str] = set()  # ... and the pass has read the node since
        self.deposed = False
        self.violations: list[str] = []
        self.gate = Gate(self.check_write, self.note_read)
        self.api.hooks.append(self.gate.hook)
        self.clock = FakeMonotonic()
        _args, self.settings = config.load([], {
            "KUBECONFIG": self.api.write_kubeconfig(f"/tmp/stateful-{id(self)}.kubeconfig"),
            "OUT_OF_SERVICE_TAINT": "always", "LOG_FORMAT": "json", "LEADER_ELECTION_NAMESPACE": ELECTION})
        client = load_api_client(self.settings)
        self.elector = LeaderElector(lambda: Api(client, self.settings), ELECTION, "leader", identity="me",
                                     lease_seconds=LEASE_SECONDS,
                                     monotonic=self.clock, write_margin=self.settings.request_timeout_seconds + 1)
        assert self.elector.step(), "this replica leads when the pass starts"
        self.done, self.code = threading.Event(), None
        logs.setup("json", "INFO", io.StringIO())
        api = Api(client, self.settings, sleep=lambda _s: None)
        self.thread = threading.Thread(target=self._pass, args=(api,), daemon=True)
        self.thread.start()

    def _pass(self, api: Api) -> None:
        try:
            self.code = run_pass(api, self.settings, guard=self.elector.write_guard)
        finally:
            with self.gate.cv:
                self.done.set()
                self.gate.cv.notify_all()

    # --- the invariant, checked as each write arrives (in the fixture's thread) ---------------------------
    def check_write(self, req: Request) -> None:
        if not req.could_change:
            return
        if self.deposed:
            self.violations.append(f"{req.method} {req.path} after a standby took the lead")
        node = self._destroys_on(req)
        if node in self.alive:
            self.violations.append(f"{req.method} {req.path} on {node}, which the world showed alive")
        if node in self.seen_untainted:
            self.violations.append(f"{req.method} {req.path} on {node}, which the pass saw untainted")

    def note_read(self, req: Request) -> None:
        if req.verb == "get" and req.resource == "nodes" and req.name in self.untainted:
            self.seen_untainted.add(req.name)

    def _destroys_on(self, req: Request) -> str | None:
        """The node a destructive write acts on: a pod or attachment delete there, a NetworkFence for it, or a
        patch adding the out-of-service taint (removing ours, or an annotation, destroys nothing)."""
        if req.resource == "networkfences" and req.verb == "create":
            return (req.body or {}).get("metadata", {}).get("name")
        if req.resource == "nodes" and req.verb == "patch":
            stored = self.api.get("nodes", req.name) or {}
            had = {t.get("key") for t in (stored.get("spec") or {}).get("taints") or ()}
            asked = {t.get("key") for t in ((req.body or {}).get("spec") or {}).get("taints") or ()}
            return req.name if OUT_OF_SERVICE_KEY in asked - had else None
        if req.verb == "delete" and req.resource in ("pods", "volumeattachments"):
            found = self.api.get(req.resource, req.name, req.namespace)
            return ((found or {}).get("spec") or {}).get("nodeName")
        return None

    # --- the pass's steps and the world's moves ---------------------------------------------------------
    @rule(requests=st.integers(1, 10))
    def step(self, requests: int) -> None:
        """Some requests of the pass go through, one at a time; the rule returns once the next is held (and
        its arrival checked) or the pass is over, so every rule starts and ends with the pass standing still."""
        for _ in range(requests):
            if not self.gate.wait_held(self.done):
                return
            self.gate.release()
        self.gate.wait_held(self.done)

    @rule(node=st.sampled_from(DEAD))
    def kubelet_renews(self, node: str) -> None:
        if self.gate.wait_held(self.done):
            self.api.add(fc.lease(node, 0))
            self.alive.add(node)

    @rule(node=st.sampled_from(DEAD))
    def node_comes_back(self, node: str) -> None:
        if self.gate.wait_held(self.done):
            self.api.add(fc.node(node, ready="True", since=0, taints=[fc.SHUTDOWN]))
            self.api.add(fc.lease(node, 0))
            self.alive.add(node)

    @rule(node=st.sampled_from(DEAD))
    def shutdown_taint_removed(self, node: str) -> None:
        if self.gate.wait_held(self.done):
            stored = self.api.get("nodes", node)
            stored["spec"]["taints"] = [t for t in stored["spec"].get("taints") or ()
                                        if t["key"] != fc.SHUTDOWN["key"]]
            self.api.add(stored)
            self.untainted.add(node)

    @rule(node=st.sampled_from(DEAD), i=st.integers(0, 1))
    def pod_replaced(self, node: str, i: int) -> None:
        if self.gate.wait_held(self.done) and self.api.get("pods", f"{node}-db-{i}", "default"):
            self.api.replace(fc.pod(f"{node}-db-{i}", node, claims=[f"data-{node}-{i}"], terminating=True))

    @rule(verb=st.sampled_from(["delete", "patch", "create"]))
    def an_answer_is_lost(self, verb: str) -> None:
        if not self.done.is_set():
            self.api.inject(Fault("reset", verb=verb, first=1))

    @rule(seconds=st.integers(1, 10))
    def time_passes(self, seconds: int) -> None:
        if self.gate.wait_held(self.done):
            self.clock.now += seconds

    @precondition(lambda self: not self.deposed)
    @rule()
    def the_leader_renews(self) -> None:
        if self.gate.wait_held(self.done):
            self.elector.step()

    @precondition(lambda self: not self.deposed and self.elector._renewed_at is not None and
                  self.clock.now >= self.elector._renewed_at + LEASE_SECONDS)
    @rule()
    def a_standby_takes_the_lead(self) -> None:
        """As client-go's rule lets it: our Lease unchanged for a whole duration since it last changed."""
        if self.gate.wait_held(self.done):
            lease = self.api.get("leases", "leader", ELECTION)
            lease["spec"]["holderIdentity"] = "standby"
            self.api.add(lease)
            self.deposed = True

    @invariant()
    def no_write_breaks_the_rules(self) -> None:
        assert not self.violations, self.violations

    def teardown(self) -> None:
        self.gate.release_all()
        self.thread.join(timeout=60)
        self.api.stop()
        assert not self.thread.is_alive(), "the pass never finished"
        # An exit code, and not 70: a pass that raised leaves none (issue 37: None passed `!= EXIT_CRASH`).
        assert self.code is not None and self.code != EXIT_CRASH, "a pass must never crash, whatever the world does"
        assert not self.violations, self.violations


PassAgainstTheWorld.TestCase.settings = hsettings(
    max_examples=int(os.environ.get("STATEFUL_EXAMPLES", "60")), stateful_step_count=80, deadline=None,
    suppress_health_check=list(HealthCheck))
TestPassAgainstTheWorld = PassAgainstTheWorld.TestCase
