"""Failover with upstream defaults, every path in one run on one cluster (`bench/failover.py --defaults`).

Node-monitor grace 50 s, the kubelet's 40 s Lease renewed every 10 s, and every rwo-failover setting at its
default. For each run: a StatefulSet pod with an RWO claim runs on a simulated node; the node powers off (and,
for the redfish rows, its BMC, sushy-tools' emulator, is told ForceOff at the same moment, so it reports Off a
few seconds later, as real hardware does); except in the redfish rows, the cloud's shutdown taint goes on at
NotReady, as a cloud provider does. The clock stops when the replacement is Running and Ready on another node
with its volume attached there. Approaches:

- nothing: nobody acts. Its runs share one outage (one node each, powered off together): nothing acts, so
  they cannot disturb each other, and the window is spent once;
- the out-of-service taint by hand: a human adds node.kubernetes.io/out-of-service=nodeshutdown:NoExecute at
  the moment the node is NotReady, with no other check, as the Kubernetes docs describe;
- CronJob mode: `reconcile.py --once` started at each wall-clock minute, as the CronJob's "* * * * *" starts a
  Job, each in the background (a pass still running at the next minute is replaced, as
  `concurrencyPolicy: Replace` does). A Job pod's own start, a few seconds on a real cluster, is not included.
  Where in the minute the power goes off decides much of a CronJob row, and the bench's own rhythm would
  repeat the same moment run after run: run r of n powers off at second (r + 1/2) * 60 / n of the minute
  (10, 30 and 50 with three runs), so the runs sample the minute evenly;
- HA continuous mode: `reconcile.py` as deploy/ha runs it (INTERVAL=15, leader election, watching), started
  before the outage;
- each mode with FENCING=networkfence (the simulated csi-addons controller answers in 2 s) and with
  FENCING=redfish (no shutdown taint at all).

Each run's phases (bench/timeline.py) are printed too. Timing is printed, never asserted.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from timeline import Timeline, print_phases

from rwo_testkit.control_plane import ControlPlane, find_assets
from rwo_testkit.e2e import CLOUD_TAINT, OOS_KEY, REPO, Cluster, wait_for
from rwo_testkit.node_sim import FenceController, NodeSimulator
from rwo_testkit.redfish_bmc import RedfishEmulator

UPSTREAM_GRACE_SECONDS, UPSTREAM_LEASE_SECONDS = 50, 40
PASS_LOGS = Path(tempfile.gettempdir()) / "rwo-failover-bench"  # each run's passes, <tag>.log
BY_HAND = "out-of-service taint by hand at NotReady"
APPROACHES = ("nothing", BY_HAND, "CronJob mode", "HA continuous mode", "CronJob mode + networkfence",
              "HA continuous mode + networkfence", "CronJob mode + redfish", "HA continuous mode + redfish")
LIVENESS = "NotReady 3 s on the server's stamp, Lease silent its 40 s on the server's clock"
PROOF = {
    "nothing": "-",
    BY_HAND: "none checked: the node controller's NotReady (50 s without a heartbeat) is taken on trust",
    "CronJob mode": LIVENESS,
    "HA continuous mode": LIVENESS,
    "CronJob mode + networkfence": "NotReady, Lease silent 40 s, and the NetworkFence Succeeded",
    "HA continuous mode + networkfence": "NotReady, Lease silent 40 s, and the NetworkFence Succeeded",
    "CronJob mode + redfish": "the BMC answers PowerState Off (asked once the Lease is silent 20 s)",
    "HA continuous mode + redfish": "the BMC answers PowerState Off (asked once the Lease is silent 20 s)",
}


@dataclass
class Run:
    """One outage: the phases seen (seconds from power-off), and when the cloud's taint went on."""

    phases: dict[str, float] = field(default_factory=dict)
    tainted: float | None = None
    off_second: float = 0.0  # the second of the wall-clock minute at power-off

    @property
    def done(self) -> float | None:
        """Seconds from power-off to the replacement Running and Ready with its volume attached; None: stuck."""
        if "Running" in self.phases and "attached" in self.phases:
            return max(self.phases["Running"], self.phases["attached"])
        return None


class Victim:
    """One node and its StatefulSet through one outage."""

    def __init__(self, cluster: Cluster, tag: str) -> None:
        self.cluster, self.tag = cluster, tag
        self.node, self.namespace = f"victim-{tag}", f"bench-{tag}"
        self.pv, self.run = f"pv-{self.namespace}-db", Run()
        cluster.sim.add_node(self.node)
        cluster.statefulset(self.namespace, "db", node_affinity=self.node)
        self.timeline: Timeline | None = None

    def ready_to_fail(self) -> None:
        old = wait_for(f"{self.namespace}/db-0 running", lambda: self.cluster.running(self.namespace, "db-0"), 90)
        wait_for("its volume attached", lambda: self.cluster.attached(self.pv, self.node), 60)
        self.timeline = Timeline(self.cluster.kubeconfig, self.namespace, "db-0", node=self.node, pv=self.pv,
                                 old_uid=old["metadata"]["uid"])

    def power_off(self, bmc: RedfishEmulator | None = None) -> None:
        assert self.timeline is not None
        self.cluster.sim.power_off(self.node)
        self.timeline.start()
        self.run.off_second = self.timeline.off_wall % 60
        if bmc is not None:
            bmc.force_off(self.node)

    def tick(self, cloud: bool, by_hand: bool) -> bool:
        """The cloud's (and the human's) taint at NotReady; True once the replacement is back."""
        assert self.timeline is not None
        if cloud and self.run.tainted is None and "NotReady" in self.timeline.phases:
            self.cluster.taint(self.node, CLOUD_TAINT)
            self.run.tainted = time.monotonic() - self.timeline.off_monotonic
            if by_hand:
                self.cluster.taint(self.node, {"key": OOS_KEY, "value": "nodeshutdown", "effect": "NoExecute"})
        self.run.phases = dict(self.timeline.phases)
        return self.run.done is not None

    def finish(self, log: Path | None) -> Run:
        assert self.timeline is not None
        self.timeline.stop()
        self.timeline.read_passes(log)
        self.run.phases = dict(self.timeline.phases)
        self.cluster.sim.remove_node(self.node)
        return self.run


class Cron:
    """`reconcile.py --once` at each wall-clock minute, in the background; a pass still running is replaced."""

    def __init__(self, env: dict, log: Path) -> None:
        self.env, self.log = env, log
        self.minute, self.process = int(time.time() // 60), None  # type: ignore[var-annotated]  # a Popen once a pass starts

    def tick(self) -> None:
        minute = int(time.time() // 60)
        if minute == self.minute:
            return
        self.minute = minute
        self.stop()
        with open(self.log, "a") as out:  # the pass appends through its own copy of the descriptor
            self.process = subprocess.Popen([sys.executable, str(REPO / "reconcile.py"), "--once"], cwd=REPO,
                                            env=self.env, stdout=out, stderr=out)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=60)


def reconciler_env(cluster: Cluster, sa: Path, approach: str, *, tag: str,
                   bmc: RedfishEmulator | None, node: str) -> dict:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(cluster.cp.workdir), "KUBECONFIG": str(sa),
           "LOG_FORMAT": "json"}
    if "networkfence" in approach:
        env.update(FENCING="networkfence", NETWORK_FENCE_CLASS="sim-fence")
    if bmc is not None:
        folder = Path(tempfile.mkdtemp(prefix="rwo-bench-bmc-"))
        (folder / "bmc.json").write_text(json.dumps({node: bmc.entry(node)}))
        env.update(FENCING="redfish", REDFISH_BMC_FILE=str(folder / "bmc.json"))
    return env


def minute_phase(run: int, runs: int) -> float:
    """The second of the wall-clock minute at which run `run` of a CronJob row powers its node off."""
    return (run + 0.5) * 60.0 / runs


def wait_for_second(second: float) -> None:
    """Sleep until the wall clock is `second` seconds into a minute."""
    time.sleep((second - time.time() % 60) % 60)


def one_run(cluster: Cluster, sa: Path, approach: str, *, run: int, runs: int, limit: float) -> Run:
    tag = f"d{APPROACHES.index(approach)}-{run}"
    victim = Victim(cluster, tag)
    PASS_LOGS.mkdir(exist_ok=True)
    log = PASS_LOGS / f"{tag}.log"
    log.write_text("")
    bmc = RedfishEmulator({victim.node: "On"}).__enter__() if "redfish" in approach else None
    env = reconciler_env(cluster, sa, approach, tag=tag, bmc=bmc, node=victim.node)
    loop, cron = None, None
    try:
        victim.ready_to_fail()
        if approach.startswith("HA"):
            with open(log, "a") as out:
                loop = subprocess.Popen([sys.executable, str(REPO / "reconcile.py")], cwd=REPO, stdout=out,
                                        stderr=out, env=dict(env, INTERVAL="15", LEADER_ELECTION="true",
                                                             METRICS_PORT="0"))
        elif approach.startswith("CronJob"):
            wait_for_second(minute_phase(run, runs))
            cron = Cron(env, log)
        victim.power_off(bmc)
        ends = time.monotonic() + limit
        while time.monotonic() < ends:
            if cron:
                cron.tick()
            if victim.tick(cloud=bmc is None, by_hand=approach == BY_HAND):
                break
            time.sleep(0.25)
    finally:
        for process in (loop, cron.process if cron else None):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=60)
        if bmc is not None:
            bmc.__exit__()
    return victim.finish(log)


def nothing_runs(cluster: Cluster, runs: int, limit: float) -> list[Run]:
    """`runs` nodes powered off together, nobody acting, for `limit` seconds."""
    victims = [Victim(cluster, f"d0-{run}") for run in range(runs)]
    for victim in victims:
        victim.ready_to_fail()
    for victim in victims:
        victim.power_off()
    ends = time.monotonic() + limit
    while time.monotonic() < ends and not all([v.tick(cloud=True, by_hand=False) for v in victims]):
        time.sleep(0.25)
    return [victim.finish(None) for victim in victims]


def run_defaults(runs: int, limit: float, only: list[str] | None) -> int:
    approaches = [a for a in APPROACHES if not only or a in only]
    results: dict[str, list[Run]] = {a: [] for a in approaches}
    with tempfile.TemporaryDirectory(prefix="rwo-bench-") as tmp, \
            ControlPlane(find_assets(REPO), Path(tmp), node_monitor_grace=UPSTREAM_GRACE_SECONDS) as cp, \
            NodeSimulator(cp.kubeconfig, lease_seconds=UPSTREAM_LEASE_SECONDS) as sim, \
            FenceController(cp.kubeconfig, delay=2.0):
        cluster = Cluster(cp, sim)
        cluster.kubectl("apply", "-f", str(REPO / "rwo_testkit" / "crds" / "networkfence.yaml"))
        for name in ("live-a", "live-b"):
            sim.add_node(name)
        sa = cluster.install_rbac()
        for extra in ("deploy/components/networkfence/rbac.yaml", "deploy/ha/leader-election-rbac.yaml"):
            cluster.kubectl("apply", "-f", str(REPO / extra))
        if "nothing" in results:
            results["nothing"] = nothing_runs(cluster, runs, limit)
            _say("nothing", results["nothing"])
        for run in range(runs):
            for approach in approaches:
                if approach != "nothing":
                    results[approach].append(one_run(cluster, sa, approach, run=run, runs=runs, limit=limit))
                    _say(approach, results[approach][-1:], run)
    print(f"## Upstream defaults: from power-off to the replacement Running and Ready with its volume attached "
          f"elsewhere ({runs} runs each, one cluster, one run of the bench; {time.strftime('%Y-%m-%d')}, "
          f"{platform.machine()}, {os.cpu_count()} cores)")
    print(f"Kubernetes v1.36.2 control plane; node-monitor grace {UPSTREAM_GRACE_SECONDS}s (checked every 2s, "
          f"where upstream checks every 5s); kubelet Lease "
          f"{UPSTREAM_LEASE_SECONDS}s renewed every {UPSTREAM_LEASE_SECONDS // 4}s; every rwo-failover setting at "
          "its default.\n")
    table(results, limit)
    print("\n### Where the time goes: each phase's median, seconds from power-off\n")
    print_phases({a: [r.phases for r in found] for a, found in results.items()})
    print(f"\nEach run's pass logs (JSON): {PASS_LOGS}/d<approach>-<run>.log", file=sys.stderr)
    return 0


def _say(approach: str, runs: list[Run], run: int | None = None) -> None:
    for i, found in enumerate(runs):
        shown = "stuck" if found.done is None else f"{found.done:.1f}s from power-off"
        shown += f" (power off at second {found.off_second:.0f} of the minute)"
        print(f"run {(run if run is not None else i) + 1}: {approach}: {shown}", file=sys.stderr, flush=True)


def table(results: dict[str, list[Run]], limit: float) -> None:
    """The Markdown table: medians from power-off (and from the cloud's taint), each run, and the proof."""
    print("| Approach | From power-off (median) | Runs, from power-off | From the shutdown taint (median) | "
          "Proof of the node's death |")
    print("|---|---|---|---|---|")
    for approach, found in results.items():
        done = [r.done for r in found]
        if all(d is not None for d in done) and done:
            power = f"{statistics.median(done):.0f} s"  # type: ignore[type-var]  # none is None: checked above
            tainted = [r.done - r.tainted for r in found if r.tainted is not None and r.done is not None]
            taint = f"{statistics.median(tainted):.0f} s" if tainted else "no taint"
        else:
            power = taint = f"stuck (> {limit:.0f} s)" if not any(d is not None for d in done) else "not every run"
        runs = ", ".join("stuck" if d is None else f"{d:.0f}" for d in done)
        print(f"| {approach} | {power} | {runs} | {taint} | {PROOF[approach]} |")
