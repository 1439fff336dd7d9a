"""Measured failover on a real control plane: the seed outage, under each approach, several runs each.

    .venv/bin/python bench/failover.py [--runs 3] [--limit SECONDS_FROM_POWER_OFF]

For each run: a StatefulSet pod with an RWO claim runs on a simulated node; the node powers off; once it is
NotReady the cloud's shutdown taint goes on (as a cloud provider does). The clock stops when the replacement
is Running and Ready on another node with its volume attached there. Approaches:

- nothing: nobody acts, up to --limit seconds;
- out-of-service taint alone: a human adds node.kubernetes.io/out-of-service at the shutdown taint;
- rwo-failover, direct path: `reconcile.py --once` every 2 s with OUT_OF_SERVICE_TAINT=never;
- rwo-failover with the out-of-service taint: the same, OUT_OF_SERVICE_TAINT=auto;
- rwo-failover, continuous mode: one `reconcile.py` process with INTERVAL=2, started before the outage;
- rwo-failover + networkfence: the out-of-service path with FENCING=networkfence, the NetworkFence CRD
  installed and a simulated csi-addons controller that answers in 2 s;
- rwo-failover + fence webhook: the same with FENCING=webhook, a local HTTPS fencer that says yes.

The reconciler runs as deployed (rbac.yaml, its ServiceAccount's token). Timing is printed, never asserted.

    .venv/bin/python bench/failover.py --defaults [--runs 3]

With upstream defaults instead, every path in one table from one run, with each phase's timeline:
bench/defaults.py says how.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import defaults

from rwo_testkit.control_plane import NODE_MONITOR_GRACE_SECONDS, ControlPlane, find_assets
from rwo_testkit.e2e import LEASE_SECONDS, OOS_KEY, PASS_ENV, REPO, Cluster, outage
from rwo_testkit.fence_server import FenceServer
from rwo_testkit.node_sim import FenceController, NodeSimulator

# With upstream defaults, doing nothing is watched for 300 s from power-off: past the 300 s taint eviction's
# start, which on its own never finalizes a StatefulSet pod on a dead node.
LIMIT_SECONDS, DEFAULTS_LIMIT_SECONDS = 150.0, 300.0

APPROACHES = ("nothing", "out-of-service taint alone", "rwo-failover, direct path",
              "rwo-failover + out-of-service taint", "rwo-failover, continuous mode",
              "rwo-failover + networkfence", "rwo-failover + fence webhook")
Result = tuple[float, float] | None  # seconds from the shutdown taint, and from power-off


def pass_env(approach: str, fencer: FenceServer) -> dict[str, str]:
    env = {"OUT_OF_SERVICE_TAINT": "never" if "direct" in approach else "auto"}
    if "networkfence" in approach:
        env.update(FENCING="networkfence", NETWORK_FENCE_CLASS="sim-fence")
    if "webhook" in approach:
        env.update(FENCING="webhook", FENCE_WEBHOOK_URL=fencer.url, FENCE_WEBHOOK_CA_FILE=fencer.ca_file)
    return env


def one_run(cluster: Cluster, sa: Path, approach: str, *, run: int, limit: float, fencer: FenceServer) -> Result:
    """The two times to the replacement, or None when it never came within `limit`."""
    tag = f"{APPROACHES.index(approach)}-{run}"
    node, namespace = f"victim-{tag}", f"bench-{tag}"
    cluster.sim.add_node(node)
    cluster.statefulset(namespace, "db", node_affinity=node)
    loop: subprocess.Popen | None = None
    env = pass_env(approach, fencer)

    def act() -> None:
        if approach == "out-of-service taint alone":
            cluster.taint(node, {"key": OOS_KEY, "value": "nodeshutdown", "effect": "NoExecute"})
        elif approach.startswith("rwo-failover") and "continuous" not in approach:
            cluster.run_pass(sa, **env)
    if "continuous" in approach:
        loop = subprocess.Popen([sys.executable, str(REPO / "reconcile.py")], cwd=REPO, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL,
                                env={"PATH": os.environ.get("PATH", ""), "KUBECONFIG": str(sa), "INTERVAL": "2",
                                     "METRICS_PORT": "0", "HOME": str(cluster.cp.workdir), **PASS_ENV, **env})
    return timed_outage(cluster, namespace, node, act=act, loop=loop, limit=limit)


def timed_outage(cluster: Cluster, namespace: str, node: str, *, act: Callable[[], None],
                 loop: subprocess.Popen | None, limit: float) -> Result:
    """The outage of `node`, then its cleanup: the loop (if any) stopped, the node removed."""
    try:
        timing = outage(cluster, namespace, "db", node=node, act=act, timeout=limit)
    finally:
        if loop:
            loop.terminate()
            loop.wait(timeout=60)
        cluster.sim.remove_node(node)
    return None if timing is None else (timing.from_taint, timing.from_power_off)


def prepare(cluster: Cluster, *rbac: str) -> Path:
    """The NetworkFence CRD, two live nodes, rbac.yaml and `rbac`; a kubeconfig for the ServiceAccount."""
    cluster.kubectl("apply", "-f", str(REPO / "rwo_testkit" / "crds" / "networkfence.yaml"))
    for name in ("live-a", "live-b"):
        cluster.sim.add_node(name)
    sa = cluster.install_rbac()
    for extra in rbac:
        cluster.kubectl("apply", "-f", str(REPO / extra))
    return sa


def measure_runs(runs: int, approaches: list, results: dict, *, one: Callable[[str, int], Result]) -> None:
    for run in range(runs):
        for approach in approaches:
            found = one(approach, run)
            results[approach].append(found)
            shown = "stuck" if found is None else f"{found[1]:.0f}s from power-off" if found[0] != found[0] else \
                f"{found[0]:.0f}s from the taint, {found[1]:.0f}s from power-off"
            print(f"run {run + 1}: {approach}: {shown}", file=sys.stderr, flush=True)


def _table(results: dict[str, list[Result]], args: argparse.Namespace, by: int = 1) -> None:
    """The Markdown table; its last column lists each run from the taint (by=0) or from power-off (by=1)."""
    print("| Approach | From the shutdown taint (median) | From power-off (median) | Runs, from "
          f"{'the taint' if by == 0 else 'power-off'} |")
    print("|---|---|---|---|")
    for approach, found in results.items():
        done = [s for s in found if s is not None]
        if len(done) == len(found) and all(s[0] != s[0] for s in done):  # nan: no shutdown taint (redfish)
            taint, power = "no taint", f"{statistics.median(s[1] for s in done):.0f} s"
        elif len(done) == len(found):
            taint = f"{statistics.median(s[0] for s in done):.0f} s"
            power = f"{statistics.median(s[1] for s in done):.0f} s"
        else:
            taint = power = f"stuck (> {args.limit:.0f} s from power-off)"
        runs = ", ".join("stuck" if s is None else f"{s[by]:.0f}" for s in found)
        print(f"| {approach} | {taint} | {power} | {runs} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--limit", type=float, help="seconds from power-off before a run counts as stuck "
                        f"(default {LIMIT_SECONDS:.0f}; {DEFAULTS_LIMIT_SECONDS:.0f} with --defaults)")
    parser.add_argument("--only", action="append", choices=APPROACHES, help="run only these approaches")
    parser.add_argument("--defaults", action="store_true", help="upstream defaults, CronJob and HA mode")
    parser.add_argument("--only-defaults", action="append", choices=defaults.APPROACHES,
                        help="with --defaults: run only these")
    args = parser.parse_args()
    if args.limit is None:
        args.limit = DEFAULTS_LIMIT_SECONDS if args.defaults else LIMIT_SECONDS
    if args.defaults:
        return defaults.run_defaults(args.runs, args.limit, args.only_defaults)
    approaches = args.only or APPROACHES
    assets = find_assets(REPO)
    results: dict[str, list[Result]] = {a: [] for a in approaches}
    with tempfile.TemporaryDirectory(prefix="rwo-bench-") as tmp, ControlPlane(assets, Path(tmp)) as cp, \
            NodeSimulator(cp.kubeconfig, lease_seconds=LEASE_SECONDS) as sim, \
            FenceController(cp.kubeconfig, delay=2.0), FenceServer() as fencer:
        cluster = Cluster(cp, sim)
        sa = prepare(cluster, "deploy/components/networkfence/rbac.yaml")
        measure_runs(args.runs, approaches, results,
                     one=lambda approach, run: one_run(cluster, sa, approach, run=run, limit=args.limit, fencer=fencer))
    print(f"## Seed outage, from the shutdown taint to the replacement Running and Ready with its volume attached "
          f"elsewhere ({args.runs} runs; {time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores)")
    print(f"Kubernetes v1.36.2 control plane; node-monitor grace {NODE_MONITOR_GRACE_SECONDS}s (NotReady about "
          f"{NODE_MONITOR_GRACE_SECONDS}s after power-off); kubelet lease {LEASE_SECONDS}s; "
          f"MIN_NOT_READY_SECONDS={PASS_ENV['MIN_NOT_READY_SECONDS']}; passes every 2 s.\n")
    _table(results, args, by=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
