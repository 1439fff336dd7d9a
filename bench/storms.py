#!/usr/bin/env python3
"""Continuous mode under watch storms (issue 25): the CPU of a watching process per minute, at scale.

    nice -n 10 .venv/bin/python bench/storms.py                      # 5,000 nodes, 1 minute per scenario
    .venv/bin/python bench/storms.py --nodes 300 --minutes 0.25      # a quick look
    nice -n 10 .venv/bin/python bench/storms.py --only 410 --settle 90   # a 410 storm once its back-off is capped

The fixture API server holds --nodes live nodes (10 KB each, with their Leases) and plays the kubelets' status
reports as bench/steady.py does (each node posted again every 5 minutes, spread evenly). For each scenario a
fresh `reconcile.py` runs in continuous mode (WATCH=true, INTERVAL=15); after its first pass the scenario
starts, and after --settle seconds (3) its CPU seconds (utime + stime from /proc), requests and bytes are measured
over --minutes:

- steady: nothing but the status reports;
- flapping taint: one node's taint added and removed every 0.15 s (an autoscaler's, say: since issue 25 it
  changes no verdict and starts no pass);
- flapping shutdown taint: the same with the cloud's shutdown taint on that live node (a pass about every
  second, each finding it split-brain while it carries the taint);
- clean-closing watches: every node watch answered with an empty 200 (the fixture's "watch-empty" fault);
- 410 storm: every node watch answered 410 Gone ("watch-gone"): list, watch, 410, list...

Goal: each at most 5% of a core (3 CPU seconds a minute). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import FakeApiServer, Fault

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from steady import Kubelets, cpu_seconds, ours, start, stop, wait_first_pass  # noqa: E402 -- after sys.path.insert

FLAP_SECONDS = 0.15
FLAP_TAINT = {"key": "example.com/flapping", "effect": "NoSchedule"}
SHUTDOWN_TAINT = {"key": "node.cloudprovider.kubernetes.io/shutdown", "effect": "NoSchedule"}


def flapping(api: FakeApiServer, name: str, done: threading.Event, *, taint: dict) -> None:
    tainted = False
    while not done.wait(FLAP_SECONDS):
        with api.lock:
            node = json.loads(api.store["nodes"][name])
        tainted = not tainted
        node["spec"]["taints"] = [taint] if tainted else []
        api.add(node)


def scenario(api: FakeApiServer, kubeconfig: str, *, minutes: float, settle: float, begin: Callable[[], None],
             end: Callable[[], None]) -> tuple[float, float, float]:
    """CPU seconds, requests and MB a minute of a fresh watching process while the scenario runs."""
    before = len(ours(api))
    proc = start(kubeconfig, True, {})
    try:
        wait_first_pass(api, proc, before, watch=True)
        begin()
        time.sleep(settle)
        cpu0, made = cpu_seconds(proc.pid), ours(api)
        n0, bytes0 = len(made), sum(r.response_bytes for r in made)
        time.sleep(minutes * 60)
        cpu1, made = cpu_seconds(proc.pid), ours(api)
        return ((cpu1 - cpu0) / minutes, (len(made) - n0) / minutes,
                (sum(r.response_bytes for r in made) - bytes0) / 1e6 / minutes)
    finally:
        end()
        stop(proc)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--settle", type=float, default=3.0, help="seconds from a scenario's start to its window")
    parser.add_argument("--only", default="", help="run only the scenarios whose name contains this")
    args = parser.parse_args()
    print(f"# rwo-failover continuous mode under watch storms, {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}", flush=True)
    with FakeApiServer() as api, tempfile.TemporaryDirectory() as tmp:
        for i in range(args.nodes):
            name = f"node-{i:05d}"
            api.add(fc.node(name, ready="True", since=86400, images=40))
            api.add(fc.lease(name, 1))
        kubeconfig = api.write_kubeconfig(os.path.join(tmp, "kubeconfig"))
        kubelets = Kubelets(api, sorted(api.store["nodes"]))
        kubelets.start()
        done = threading.Event()

        def flap(taint: dict) -> Callable[[], None]:
            def begin() -> None:
                done.clear()
                threading.Thread(target=flapping, args=(api, "node-00001", done), kwargs={"taint": taint},
                                 daemon=True).start()
            return begin

        def fault(kind: str) -> Callable[[], None]:
            def begin() -> None:
                api.inject(Fault(kind, resource="nodes"))
                api.drop_watches()
            return begin
        scenarios = [("steady", lambda: None, lambda: None),
                     ("flapping taint (0.15 s)", flap(FLAP_TAINT), done.set),
                     ("flapping shutdown taint", flap(SHUTDOWN_TAINT), done.set),
                     ("clean-closing watches", fault("watch-empty"), api.clear_faults),
                     ("410 storm", fault("watch-gone"), api.clear_faults)]
        rows = []
        for name, begin, end in [found for found in scenarios if args.only in found[0]]:
            rows.append((name, scenario(api, kubeconfig, minutes=args.minutes, settle=args.settle, begin=begin,
                                        end=end)))
            print(f"{name} done: {rows[-1][1]}", file=sys.stderr, flush=True)
        kubelets.stop.set()
    print(f"\n## Watch storms, {args.nodes:,} nodes, WATCH=true, INTERVAL=15, {args.minutes:g} min per scenario, "
          f"from {args.settle:g} s after it starts")
    print(f"{'':<28}{'CPU s/min':>11}{'% of a core':>13}{'requests/min':>14}{'MB/min':>10}")
    for name, (cpu, requests, mb) in rows:
        print(f"{name:<28}{cpu:>11.2f}{cpu / 60 * 100:>12.1f}%{requests:>14.1f}{mb:>10.2f}")
    print("goal: each <= 5% of a core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
