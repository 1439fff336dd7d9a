"""Invariants over sequences of outages (issue 43): real one-shot passes against a world that keeps moving between
them, for each UNDO and FENCING mode that needs no BMC.

The world: four live workers and node n1, which holds a StatefulSet pod with an attached RWO claim. Between passes
its machine powers off (the cloud's shutdown taint, NotReady for ten minutes), comes back with or without a reboot
(a new bootID, or the same one: the network came back), runs pods that tolerate our out-of-service taint, sees
Kubernetes itself release a pod through our standing taint (PodGC), a partition silences three workers (a storm),
an operator pauses, resumes, confirms a power cycle (UNDO=operator), the fence controller answers, and a second
passes. After each pass it checks, whatever came before:
- our out-of-service taint, and our NetworkFence, are lifted only when the machine rebooted (UNDO=bootid), or the
  operator confirmed it (UNDO=operator), after the **last** release through them;
- nothing is deleted, released or fenced while paused, during a partition, or in the storm cool-down after one;
- the exit code says so: a paused pass exits 0 and says who paused; a refused one exits 3.

Reverting either half of the fix for "one record across two outages" (issue 43: our record refreshed at a release
through a standing taint, act/our_taint.py and act/taint_records.py's refresh; and rewritten as memory while the
node is not Ready, planner.taint.machines_now) makes this machine fail on a sequence like: power off, pass, power
on with a reboot, a pod runs there, power off, pass, power on without a reboot, a second, pass (docs/testing.md).
STATEFUL_EXAMPLES sets the number of examples (default 25; each prints its steps when it fails, with the seed).
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import time
import uuid
from collections import Counter

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from rwo_failover.model import OUT_OF_SERVICE_KEY, POWER_CYCLED_ANNOTATION
from rwo_failover.observe.sightings import Sightings
from rwo_failover.run.cli import main
from rwo_failover.run.exitcodes import EXIT_OK, EXIT_REFUSED
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import FakeApiServer

NODE = "n1"
WORKERS = ("w0", "w1", "w2", "w3")
PARTITIONED = WORKERS[:3]  # 3 of 5 nodes not Ready: past MAX_UNHEALTHY_FRACTION=0.5
CONTROL = ("rwo-failover", "rwo-failover-control")
FENCE_CLASS = "sim"


def destructive(request) -> bool:
    """A write that frees, fences or lifts: a pod or attachment delete, a node patch, a NetworkFence created,
    deleted or patched in its spec. A patch of our fence's metadata alone records the machine under it: memory,
    written in a paused or refused pass too (act/fence_machine.py), as our taint's record is."""
    if not request.could_change:
        return False
    if request.resource == "networkfences" and request.verb == "patch":
        body = request.body if isinstance(request.body, dict) else json.loads(request.body or "{}")
        return set(body) - {"metadata"} != set()
    return (request.verb, request.resource) in (("delete", "pods"), ("delete", "volumeattachments"),
                                                ("patch", "nodes")) or request.resource == "networkfences"


class Outages(RuleBasedStateMachine):
    undo = "bootid"
    fencing = "none"
    seen: Counter[str] = Counter()  # what the examples of one mode did, so a run that checked nothing fails

    def __init__(self) -> None:
        super().__init__()
        self.api = FakeApiServer().start()
        self.kubeconfig = self.api.write_kubeconfig(os.path.join(tempfile.mkdtemp(), "kubeconfig"))
        for name in WORKERS:
            fc.live_node(self.api, name)
        fc.live_node(self.api, NODE)
        self.pods = 0
        self.a_pod_runs_there()
        self.up, self.paused, self.storming, self.storm_seen = True, False, False, False
        # Since the last release through our taint or fence on n1: a reboot, and the operator's word on it.
        self.rebooted_since_release, self.confirmed_since_release = True, False
        self.released_ever = False
        self.paused_passes, self.partitioned = 0, False
        self.unseen = False  # Kubernetes released through our taint in this outage, and no pass has run since
        self.history: list[str] = []

    def teardown(self) -> None:
        self.api.stop()

    # --- the world ------------------------------------------------------------------------------------------
    @initialize()
    def a_first_outage_is_failed_over(self) -> None:
        """Every example starts where the invariants begin to matter: n1 died, and a pass released its pod."""
        self.power_off(then="a pass")
        if self.fencing == "networkfence":  # the pass fenced and waits for the answer: it comes, and a pass acts
            self.the_fence_controller_answers()
            self.a_pass()
        assert self.released_ever and self.ours(), self.history

    def a_pod_runs_there(self) -> None:
        """A StatefulSet pod with its RWO claim attached on n1 (it tolerates our taint, if ours stands)."""
        name = f"db-{self.pods}"
        self.pods += 1
        fc.add_volume(self.api, f"data-{name}", attached_to=NODE)
        self.api.add(fc.pod(name, NODE, claims=[f"data-{name}"], terminating=True))  # evicted once it goes down

    @precondition(lambda self: self.up)
    @rule(then=st.sampled_from(["a pass", "Kubernetes releases", "nothing yet"]))
    def power_off(self, then: str) -> None:
        """The machine stops: NotReady for ten minutes, the cloud's shutdown taint, our taint kept if it stands;
        the same Node object and boot. Its pods stay as its kubelet last reported them."""
        current = self.api.get("nodes", NODE)
        ours = [t for t in current["spec"].get("taints") or () if t["key"] == OUT_OF_SERVICE_KEY]
        dead = fc.node(NODE, ready="Unknown", since=600, taints=[fc.SHUTDOWN, fc.UNREACHABLE, *ours])
        dead["metadata"]["uid"] = current["metadata"]["uid"]
        self.api.add(fc.rebooted(dead, current["status"]["nodeInfo"]["bootID"]))
        self.api.add(fc.lease(NODE, 640))
        self.up = False
        if then == "a pass":
            self.a_pass()
        elif then == "Kubernetes releases":
            self.kubernetes_releases_through_our_taint()
            self.unseen = True

    # Every outage lasts until a pass has seen it (paused and refused passes too): Kubernetes' release through our
    # standing taint during an outage no pass sees is the documented limit that
    # test_a_release_no_pass_sees_is_not_known_to_undo shows.
    @precondition(lambda self: not self.up and not self.unseen)
    @rule(reboot=st.booleans(), pod=st.booleans())
    def power_on(self, reboot: bool, pod: bool) -> None:
        """Back: Ready with a fresh Lease, the cloud's taint gone, ours kept; a new bootID when it rebooted (a power
        cycle), the same one when only its network or kubelet came back. By then the attacher has detached what
        was released."""
        self.api.attacher.detach()
        current = self.api.get("nodes", NODE)
        ours = [t for t in current["spec"].get("taints") or () if t["key"] == OUT_OF_SERVICE_KEY]
        node = fc.node(NODE, ready="True", since=120, taints=ours)
        node["metadata"]["uid"] = current["metadata"]["uid"]
        boot = str(uuid.uuid4()) if reboot else current["status"]["nodeInfo"]["bootID"]
        self.api.add(fc.rebooted(node, boot))
        self.api.add(fc.lease(NODE, 2))
        self.up = True
        if reboot:
            self.rebooted_since_release = True
        if pod:  # the scheduler puts a pod there that tolerates our taint, if ours stands
            self.a_pod_runs_there()
        time.sleep(1.1)  # RECOVERY_SECONDS (1) of Ready, timed on the server's clock, before a pass may lift

    def kubernetes_releases_through_our_taint(self) -> None:
        """What our standing taint makes Kubernetes do with no pass of ours: PodGC deletes the pods on the
        out-of-service node, and their attachments go: a release through our taint."""
        if not self.ours():
            return
        for pod in [p for p in self.api.objects("pods") if p["spec"]["nodeName"] == NODE]:
            self.api.delete_object("pods", pod["metadata"]["name"], "default")
            claim = f"pv-default-data-{pod['metadata']['name']}"
            for attachment in self.api.objects("volumeattachments"):
                if attachment["spec"]["source"]["persistentVolumeName"] == claim:
                    self.api.remove("volumeattachments", attachment["metadata"]["name"])
            self.released()

    @precondition(lambda self: self.paused_passes < 2)  # at most twice an example: outages are what is explored
    @rule()
    def a_pass_while_paused(self) -> None:
        """An operator pauses, a pass runs, the operator resumes."""
        self.paused_passes += 1
        self.pause(True)
        self.a_pass()
        self.pause(False)

    @precondition(lambda self: not self.partitioned)  # once an example
    @rule()
    def a_partition_comes_and_goes(self) -> None:
        """A partition silences three workers during a pass (the brake trips, the storm is remembered), heals,
        the next pass cools down, and an operator ends the cool-down early (docs/operations.md)."""
        self.partitioned = True
        self.partition(True)
        self.a_pass()
        self.partition(False)
        self.a_pass()
        control = self.api.get("configmaps", CONTROL[1], CONTROL[0])
        if control is not None:
            for key in ("stormTrippedAt", "stormCalmSince"):
                (control.get("data") or {}).pop(key, None)
            self.api.add(control)
        self.storm_seen = False

    @precondition(lambda self: self.undo == "operator" and self.record() is not None)
    @rule()
    def operator_confirms_a_power_cycle(self) -> None:
        """The command the OutOfServiceTaintKept Warning gives, on our record as it is now."""
        record = self.record()
        assert record is not None
        record["metadata"].setdefault("annotations", {})[POWER_CYCLED_ANNOTATION] = "true"
        self.api.add(record)
        self.confirmed_since_release = True

    @precondition(lambda self: self.fencing == "networkfence" and self.api.get("networkfences", NODE) is not None)
    @rule()
    def the_fence_controller_answers(self) -> None:
        fence = self.api.get("networkfences", NODE)
        unfence = fence["spec"]["fenceState"] == "Unfenced"
        fence["status"] = {"result": "Succeeded", "message": "done", "conditions": [
            {"type": "Fenced", "status": "False" if unfence else "True", "reason": "Succeeded",
             "observedGeneration": fence["metadata"]["generation"], "message": "done",
             "lastTransitionTime": fc.stamp(0)}]}
        self.api.add(fence)

    # --- a pass, and what must hold after it ------------------------------------------------------------------
    @rule()
    def a_pass(self) -> None:
        had_taint, had_fence = bool(self.ours()), self.api.get("networkfences", NODE) is not None
        fenced_before = had_fence and self.api.get("networkfences", NODE)["spec"]["fenceState"] == "Fenced"
        if self.storming:
            self.storm_seen = True  # the pass sees it, paused or not, and the cool-down (300 s) outlasts the test
        before = len(self.api.requests)
        code, summary = self.run()
        made = self.api.requests[before:]
        self.history.append(f"exit {code}: {summary.get('refusal') or summary.get('paused') or ''}")
        writes = [f"{r.verb} {r.path}" for r in made if destructive(r)]
        released = [r for r in made if r.could_change and r.verb == "delete" and r.status < 300
                    and r.resource in ("pods", "volumeattachments")]
        self.seen["passes"] += 1
        if not self.up:
            self.unseen = False
        if self.paused:
            self.seen["paused passes"] += 1
            assert writes == [], f"written while paused: {writes}"
            assert code == EXIT_OK and "erin" in summary["paused"], (code, summary)
            return
        if self.storming or self.storm_seen:
            self.seen["refused passes"] += 1
            assert writes == [], f"written during a storm or its cool-down: {writes}"
            assert code == EXIT_REFUSED, (code, summary)
            return
        if released:
            self.seen["passes that released"] += 1
            self.released()
        lifted = had_taint and not self.ours()
        unfenced = fenced_before and (self.api.get("networkfences", NODE) is None or
                                      self.api.get("networkfences", NODE)["spec"]["fenceState"] != "Fenced")
        for what, happened in (("our out-of-service taint", lifted), ("our NetworkFence", unfenced)):
            if not happened or not self.released_ever:
                continue
            self.seen[f"{what} lifted"] += 1
            if self.undo == "bootid":
                assert self.rebooted_since_release, f"{what} lifted with no reboot since the last release"
            else:
                assert self.confirmed_since_release, f"{what} lifted with no word from the operator since the " \
                    "last release"

    @rule()
    def another_pass(self) -> None:
        """A pass is the step that matters: twice as likely as any other."""
        self.a_pass()

    # --- helpers ----------------------------------------------------------------------------------------------
    def pause(self, paused: bool) -> None:
        found = self.api.get("configmaps", CONTROL[1], CONTROL[0])
        control = found or {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": CONTROL[1], "namespace": CONTROL[0]}, "data": {}}
        control.setdefault("data", {}).update({"paused": "true" if paused else "false", "pausedBy": "erin"})
        self.api.add(control)
        self.paused = paused

    def partition(self, storming: bool) -> None:
        for name in PARTITIONED:
            if storming:
                self.api.add(fc.node(name, ready="Unknown", since=120))
                self.api.add(fc.lease(name, 160))
            else:
                fc.live_node(self.api, name)
        self.storming = storming

    def released(self) -> None:
        self.rebooted_since_release = self.confirmed_since_release = False
        self.released_ever = True

    def ours(self) -> list[dict]:
        return [t for t in self.api.get("nodes", NODE)["spec"].get("taints") or () if t["key"] == OUT_OF_SERVICE_KEY]

    def record(self) -> dict | None:
        found = [c for c in self.api.objects("configmaps") if c["metadata"]["name"].startswith("rwo-taint-")]
        return found[0] if found else None

    def run(self) -> tuple[int, dict]:
        env = {"KUBECONFIG": self.kubeconfig, "LOG_FORMAT": "json", "PASS_TIMEOUT_SECONDS": "20",
               "ONCE_WAIT_SECONDS": "0", "UNDO": self.undo, "RECOVERY_SECONDS": "1", "FENCING": self.fencing}
        if self.fencing == "networkfence":
            env["NETWORK_FENCE_CLASS"] = FENCE_CLASS
        out = io.StringIO()
        # A process that has watched the cluster all along (continuous mode's leader): the server's stamps judge.
        code = main(["--once"], env, stdout=out, stderr=io.StringIO(), sleep=lambda _s: None,
                    sightings=Sightings(watched_for=86400.0))
        logs = [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]
        [summary] = [line for line in logs if line["message"] == "pass finished"]
        return code, summary


EXAMPLES = int(os.environ.get("STATEFUL_EXAMPLES", "30"))
STEPS = 25


def machine(undo: str, fencing: str) -> type[RuleBasedStateMachine]:
    named = type(f"Outages_{undo}_{fencing}", (Outages,), {"undo": undo, "fencing": fencing})
    named.TestCase.settings = hsettings(max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
                                        print_blob=True, suppress_health_check=list(HealthCheck))
    return named


@pytest.mark.parametrize("undo, fencing", [("bootid", "none"), ("operator", "none"), ("bootid", "networkfence"),
                                           ("operator", "networkfence")])
def test_invariants_hold_over_any_sequence_of_outages(undo, fencing):
    checked = machine(undo, fencing)
    checked.seen = Counter()
    checked.TestCase().runTest()
    print(f"\nUNDO={undo} FENCING={fencing}: {EXAMPLES} examples of up to {STEPS} steps: {dict(checked.seen)}")
    assert checked.seen["passes that released"] and checked.seen["paused passes"] and checked.seen["refused passes"], \
        checked.seen
    if (undo, fencing) == ("bootid", "none"):  # elsewhere a lift needs steps a random sequence seldom completes (the
        # operator's word after the last release; the fence answered Unfenced, then deleted): not counted on
        assert checked.seen["our out-of-service taint lifted"], checked.seen


@pytest.mark.xfail(strict=True, reason="documented limit (docs/safety.md): a release Kubernetes makes through our "
                   "standing taint during an outage no pass sees leaves our record naming the machine before it")
def test_a_release_no_pass_sees_is_not_known_to_undo():
    """Found by the machine above: our taint stands on a node back after a reboot (B2), held there by a pod that
    tolerates it; the node dies and returns without a reboot before any pass runs, while PodGC, seeing our taint,
    deleted that pod and the attacher detached its volume. No pass saw the outage, so our record still names the
    boot of the first one (B1), and the next pass takes B2 for a reboot after the last release and lifts the taint.
    Strict: it fails here once undo can tell."""
    world = machine("bootid", "none")()
    try:
        world.a_first_outage_is_failed_over()
        world.power_on(reboot=True, pod=True)
        world.power_off(then="Kubernetes releases")
        world.unseen = False  # the machine's own rule forbids this step: it is the limit under test
        world.power_on(reboot=False, pod=False)
        world.a_pass()  # raises when the taint is lifted
    finally:
        world.teardown()
