"""Measured failover on a real control plane: the seed outage, under each approach, several runs each.

    .venv/bin/python bench/failover.py [--runs 3] [--limit 150]

For each run: a StatefulSet pod with an RWO claim runs on a simulated node; the node powers off; once it is
NotReady the cloud's shutdown taint goes on (as a cloud provider does). The clock stops when the replacement
is Running and Ready on another node with its volume attached there. Approaches:

- nothing: nobody acts, up to --limit seconds;
- out-of-service taint alone: a human adds node.kubernetes.io/out-of-service at the shutdown taint;
- rwo-failover, direct path: `reconcile.py --once` every 2 s with OUT_OF_SERVICE_TAINT=never;
- rwo-failover with the out-of-service taint: the same, OUT_OF_SERVICE_TAINT=auto;
- rwo-failover, continuous mode: one `reconcile.py` process with INTERVAL=2, started before the outage.

The reconciler runs as deployed (rbac.yaml, its ServiceAccount's token). Timing is printed, never asserted.
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
from pathlib import Path
from typing import Callable, Optional

from rwo_testkit.control_plane import NODE_MONITOR_GRACE_SECONDS, ControlPlane, find_assets
from rwo_testkit.e2e import LEASE_SECONDS, OOS_KEY, PASS_ENV, REPO, Cluster, outage
from rwo_testkit.node_sim import NodeSimulator

APPROACHES = ("nothing", "out-of-service taint alone", "rwo-failover, direct path",
              "rwo-failover + out-of-service taint", "rwo-failover, continuous mode")


def one_run(cluster: Cluster, sa: Path, approach: str, run: int, limit: float) -> Optional[float]:
    """Seconds from the shutdown taint to the replacement, or None when it never came within `limit`."""
    tag = f"{APPROACHES.index(approach)}-{run}"
    node, namespace = f"victim-{tag}", f"bench-{tag}"
    cluster.sim.add_node(node)
    cluster.statefulset(namespace, "db", node_affinity=node)
    loop: Optional[subprocess.Popen] = None
    act: Callable[[], None] = lambda: None  # noqa: E731 - "nothing" does nothing
    if approach == "out-of-service taint alone":
        act = lambda: cluster.taint(node, {"key": OOS_KEY, "value": "nodeshutdown", "effect": "NoExecute"})  # noqa: E731
    elif approach.startswith("rwo-failover,") or approach.startswith("rwo-failover +"):
        env = {"OUT_OF_SERVICE_TAINT": "never" if "direct" in approach else "auto"}
        if "continuous" in approach:
            loop = subprocess.Popen([sys.executable, str(REPO / "reconcile.py")], cwd=REPO, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL,
                                    env={"PATH": os.environ.get("PATH", ""), "KUBECONFIG": str(sa), "INTERVAL": "2",
                                         "HOME": str(cluster.cp.workdir), **PASS_ENV})
        else:
            act = lambda: cluster.run_pass(sa, **env) and None  # noqa: E731
    try:
        timing = outage(cluster, namespace, "db", node, act, timeout=limit)
    finally:
        if loop:
            loop.terminate()
            loop.wait(timeout=60)
        cluster.sim.remove_node(node)
    return None if timing is None else timing.from_taint


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--limit", type=float, default=150, help="seconds before a run counts as stuck")
    args = parser.parse_args()
    assets = find_assets(REPO)
    results: dict[str, list[Optional[float]]] = {a: [] for a in APPROACHES}
    with tempfile.TemporaryDirectory(prefix="rwo-bench-") as tmp, ControlPlane(assets, Path(tmp)) as cp, \
            NodeSimulator(cp.kubeconfig, lease_seconds=LEASE_SECONDS) as sim:
        cluster = Cluster(cp, sim)
        for name in ("live-a", "live-b"):
            sim.add_node(name)
        sa = cluster.install_rbac()
        for run in range(args.runs):
            for approach in APPROACHES:
                seconds = one_run(cluster, sa, approach, run, args.limit)
                results[approach].append(seconds)
                shown = "stuck" if seconds is None else f"{seconds:.0f}s"
                print(f"run {run + 1}: {approach}: {shown}", file=sys.stderr, flush=True)
    print(f"## Seed outage, from the shutdown taint to the replacement Running and Ready with its volume attached "
          f"elsewhere ({args.runs} runs; {time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores)")
    print(f"Kubernetes v1.36.2 control plane; node-monitor grace {NODE_MONITOR_GRACE_SECONDS}s (NotReady about "
          f"{NODE_MONITOR_GRACE_SECONDS}s after power-off); kubelet lease {LEASE_SECONDS}s; "
          f"MIN_NOT_READY_SECONDS={PASS_ENV['MIN_NOT_READY_SECONDS']}; passes every 2 s.\n")
    print("| Approach | Median | Runs |")
    print("|---|---|---|")
    for approach, found in results.items():
        done = [s for s in found if s is not None]
        median = f"{statistics.median(done):.0f} s" if len(done) == len(found) else f"stuck (> {args.limit:.0f} s)"
        runs = ", ".join("stuck" if s is None else f"{s:.0f}" for s in found)
        print(f"| {approach} | {median} | {runs} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
