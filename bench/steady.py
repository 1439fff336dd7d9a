#!/usr/bin/env python3
"""Continuous mode at scale: steady state, polling against watching, and the reaction to a node going down.

    nice -n 10 .venv/bin/python bench/steady.py              # 5,000 nodes, 150,000 pods, 5 minutes per mode
    .venv/bin/python bench/steady.py --nodes 200 --minutes 0.5   # a quick look
    .venv/bin/python bench/steady.py --minutes 0.5 --reaction-runs 8 --log /tmp/steady.log   # what each pass read

The fixture API server holds the scale benchmark's cluster (bench/scale.py) with no outage, and plays the
kubelets' own status reports: each node's status is posted again every 5 minutes (the kubelet's
nodeStatusReportFrequency), spread evenly, changing only its heartbeat times. That is what a watch must
receive whatever it does: about 1,000 node events a minute at 5,000 nodes.

1. Steady state: `reconcile.py` in continuous mode with INTERVAL=15, first polling (WATCH=false, the loop
   before issue 20: a node list every pass) and then watching (WATCH=true), for --minutes each after its
   first pass. Measured over that window: the reconciler's CPU seconds (utime + stime from /proc), the bytes
   the API server sent it (watch streams counted as they flow) and its requests, each per minute. A watch
   relists everything every RELIST_SECONDS (its default, an hour), which a 5-minute window does not include,
   so an amortized figure adds one full list's cost (measured on the first list) per RELIST_SECONDS.
2. Reaction, watching: a node is tainted and NotReady so that it becomes provably down (NotReady for
   MIN_NOT_READY_SECONDS=60, set here, Lease long expired) a few seconds later, by the server's clock (the fixture's
   Date header is this machine's clock). That moment is the one the server's evidence allows: the status
   write's managedFields stamp (whole seconds, truncated) plus a second, plus MIN_NOT_READY_SECONDS, as
   planner/liveness.py judges it. The figure is from then to the first write the API server receives (the
   out-of-service taint). Repeated --reaction-runs times on different nodes. Simulated kubelets of nodes
   that are not Ready post nothing.

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TextIO

from rwo_failover import settings as config
from rwo_failover.kube import USER_AGENT
from rwo_failover.model import server_time
from rwo_failover.planner.liveness import STAMP
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import FakeApiServer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from scale import load, rich_pod  # noqa: E402 -- after sys.path.insert

STATUS_REPORT_SECONDS = 300.0  # the kubelet's nodeStatusReportFrequency
RELIST_SECONDS = float(config.BY_NAME["RELIST_SECONDS"].default)
CLOCK_TICK = os.sysconf("SC_CLK_TCK")


class Kubelets(threading.Thread):
    """Every node's status posted again every `every` seconds (STATUS_REPORT_SECONDS by default), spread
    evenly: heartbeat times only, and the server's stamp of that write.

    Upstream-true for a kubelet with its node Lease (every kubelet since v1.17): it renews the Lease every 10 s
    and patches its node's status only when the status changed or nodeStatusReportFrequency (5 min) has
    passed (pkg/kubelet/kubelet_node_status.go, tryUpdateNodeStatus), so in a cluster with nothing happening
    a node watch receives each node about once every 5 minutes. The API server stamps the kubelet's `status`
    managedFields entry with its own time on that patch, as on a real control plane."""

    def __init__(self, api: FakeApiServer, names: list[str], every: float = STATUS_REPORT_SECONDS) -> None:
        super().__init__(daemon=True)
        self.api, self.names, self.every = api, names, every
        self.stop = threading.Event()
        self.posted = 0

    def run(self) -> None:
        every = self.every / len(self.names)
        started, i = time.monotonic(), 0
        while not self.stop.is_set():
            due = started + i * every
            if self.stop.wait(max(0.0, due - time.monotonic())):
                return
            name = self.names[i % len(self.names)]
            with self.api.lock:
                node = json.loads(self.api.store["nodes"][name])
                if not any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"]):
                    i += 1  # a stopped node's kubelet posts nothing (reaction() stops them)
                    continue
                for condition in node["status"]["conditions"]:
                    condition["lastHeartbeatTime"] = fc.stamp(0)
                for entry in node["metadata"].get("managedFields", []):
                    if entry.get("manager") == "kubelet" and entry.get("subresource") == "status":
                        entry["time"] = fc.stamp(0)
                self.api.add(node)
            self.posted += 1
            i += 1


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK  # utime, stime


def ours(api: FakeApiServer) -> list:
    with api.lock:
        return [r for r in api.requests if r.user_agent == USER_AGENT]


@dataclass
class Window:
    minutes: float
    cpu: float
    bytes: int
    requests: int
    first_list_bytes: int = 0
    first_list_requests: int = 0
    first_list_cpu: float = 0.0


LOG: TextIO | None = None  # --log: the reconciler's own log at INFO (each pass, what triggered it, its reads)


def start(kubeconfig: str, watch: bool, extra: dict) -> subprocess.Popen:
    env = {"KUBECONFIG": kubeconfig, "PATH": os.environ.get("PATH", ""), "LOG_FORMAT": "json",
           "LOG_LEVEL": "INFO" if LOG else "WARNING", "INTERVAL": "15", "WATCH": "true" if watch else "false",
           "METRICS_PORT": "0",
           "PASS_TIMEOUT_SECONDS": "600", "REQUEST_TIMEOUT_SECONDS": "120",
           # The reaction figure times a node that becomes provable 60 s after its NotReady (see `react`).
           "MIN_NOT_READY_SECONDS": "60", **extra}
    return subprocess.Popen([sys.executable, str(ROOT / "reconcile.py")], cwd=ROOT, env=env,
                            stdout=LOG or subprocess.DEVNULL, stderr=LOG or subprocess.PIPE, text=True)


def wait_first_pass(api: FakeApiServer, proc: subprocess.Popen, before: int, *, watch: bool) -> None:
    """Until the first pass has read everything: its last list is of our recovery records (ConfigMaps), after
    the nodes and their Leases; watching, until the node and recovery-record watches are open too."""
    deadline = time.monotonic() + 600
    wanted = {("list", "configmaps")} | ({("watch", "nodes"), ("watch", "configmaps")} if watch else set())
    while time.monotonic() < deadline:
        if wanted <= {(r.verb, r.resource) for r in ours(api)[before:]}:
            time.sleep(2)
            return
        if proc.poll() is not None:
            said = proc.stderr.read()[-2000:] if proc.stderr else f"see {LOG.name if LOG else 'its log'}"
            raise RuntimeError(f"reconcile.py exited {proc.returncode}: {said}")
        time.sleep(0.2)
    raise RuntimeError("no first pass within 600 s")


def steady(api: FakeApiServer, kubeconfig: str, *, watch: bool, minutes: float) -> tuple[Window, subprocess.Popen]:
    before = len(ours(api))
    proc = start(kubeconfig, watch, {})
    wait_first_pass(api, proc, before, watch=watch)
    first = ours(api)[before:]
    cpu0 = cpu_seconds(proc.pid)
    made = ours(api)
    n0, bytes0 = len(made), sum(r.response_bytes for r in made)
    time.sleep(minutes * 60)
    cpu1 = cpu_seconds(proc.pid)
    made = ours(api)
    window = Window(minutes, cpu1 - cpu0, sum(r.response_bytes for r in made) - bytes0, len(made) - n0)
    lists = [r for r in first if r.verb == "list" and r.resource == "nodes"]
    window.first_list_bytes = sum(r.response_bytes for r in lists)
    window.first_list_requests = len(lists)
    window.first_list_cpu = cpu0  # up to its first pass: start-up, the first list and a pass (an upper bound)
    return window, proc


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()


def reaction(api: FakeApiServer, node: str, rng: random.Random, *, lead: float = 5.0) -> float:
    """Make `node` provably down `lead` seconds from now; seconds from that moment to the first write."""
    writes: list[float] = []

    def listener(req) -> None:  # the first write for this node: its out-of-service taint
        if req.user_agent == USER_AGENT and req.verb == "patch" and req.name == node and not writes:
            writes.append(time.time())
    _claims, _pv, _va = fc.add_volume(api, f"data-down-{node}", namespace="team-00", attached_to=node)
    api.add(rich_pod(f"db-down-{node}", node, "team-00", rng=rng, claims=[f"data-down-{node}"], terminating=True,
                     ready="False", owner="StatefulSet"))
    api.add(fc.lease(node, 200))
    down = fc.node(node, ready="Unknown", since=60 - lead, images=40, taints=[fc.SHUTDOWN, fc.UNREACHABLE])
    # Provable on the server's evidence: the last write of the node's status (the node lifecycle controller's
    # Ready=Unknown, stamped in managedFields in whole seconds, truncated: so a second later, STAMP), plus
    # MIN_NOT_READY_SECONDS; the Lease has been silent far longer. Not the Ready condition's transition time,
    # which is the same truncated second: a node is not provably down before the stamp says so.
    provable = server_time(down["metadata"], "status") + STAMP + timedelta(seconds=60)
    api.listeners.append(listener)
    try:
        api.add(down)
        deadline = time.monotonic() + lead + 60
        while not writes and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        api.listeners.remove(listener)
    if not writes:
        raise RuntimeError(f"no write within {lead + 60:.0f}s for {node}")
    return writes[0] - provable.timestamp()


def per_minute(window: Window, amortized: bool = False) -> tuple[float, float, float]:
    cpu, mb, req = window.cpu, window.bytes / 1e6, float(window.requests)
    if amortized:  # one full node list per RELIST_SECONDS (its default), at what the first list cost
        share = window.minutes * 60 / RELIST_SECONDS
        cpu += share * window.first_list_cpu
        mb += share * window.first_list_bytes / 1e6
        req += share * window.first_list_requests
    return cpu / window.minutes, mb / window.minutes, req / window.minutes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--reaction-runs", type=int, default=3)
    parser.add_argument("--log", metavar="FILE", help="keep the reconciler's JSON log, at INFO, in FILE (a look at "
                        "what each pass read and when; its own cost is then in the figures)")
    args = parser.parse_args()
    print(f"# rwo-failover continuous mode, {time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} "
          f"cores, Python {platform.python_version()}", flush=True)
    global LOG
    with FakeApiServer() as api, tempfile.TemporaryDirectory() as tmp, \
            open(args.log, "w") if args.log else contextlib.nullcontext() as LOG:
        t0 = time.perf_counter()
        load(api, args.nodes, dead_nodes=0)
        pods = len(api.store["pods"])
        print(f"fixture: {args.nodes:,} nodes, {pods:,} pods, loaded in {time.perf_counter() - t0:.0f} s",
              flush=True)
        kubeconfig = api.write_kubeconfig(os.path.join(tmp, "kubeconfig"))
        kubelets = Kubelets(api, sorted(api.store["nodes"]))
        kubelets.start()
        polling, proc = steady(api, kubeconfig, watch=False, minutes=args.minutes)
        stop(proc)
        print(f"polling done: {polling}", file=sys.stderr, flush=True)
        watching, proc = steady(api, kubeconfig, watch=True, minutes=args.minutes)
        print(f"watching done: {watching}", file=sys.stderr, flush=True)
        rng = random.Random(7)
        names = rng.sample(sorted(api.store["nodes"]), args.reaction_runs)
        reactions = [reaction(api, name, rng) for name in names]
        stop(proc)
        kubelets.stop.set()
    print(f"\n## 1. Steady state, {args.nodes:,} nodes and {pods:,} pods, no outage, INTERVAL=15, "
          f"{args.minutes:g} min per mode after the first pass; kubelet status reports every "
          f"{STATUS_REPORT_SECONDS:.0f} s ({kubelets.posted:,} node updates in all)")
    rows = [("polling (WATCH=false)", per_minute(polling)), ("watching (WATCH=true)", per_minute(watching)),
            (f"watching, relist per {RELIST_SECONDS / 60:.0f} min", per_minute(watching, amortized=True))]
    print(f"{'':<28}{'CPU s/min':>11}{'MB/min':>10}{'requests/min':>14}")
    for name, (cpu, mb, req) in rows:
        print(f"{name:<28}{cpu:>11.2f}{mb:>10.2f}{req:>14.1f}")
    base = rows[0][1]
    for name, figures in rows[1:]:
        ratios = [b / f if f else float("inf") for b, f in zip(base, figures, strict=True)]
        print(f"polling / {name}: CPU {ratios[0]:.1f}x, bytes {ratios[1]:.1f}x, requests {ratios[2]:.1f}x "
              "(goal: >= 20x each)")
    print(f"\n## 2. Reaction, watching: from provably down (server clock) to the first write, "
          f"{len(reactions)} runs at {args.nodes:,} nodes")
    print("runs: " + ", ".join(f"{r:.2f} s" for r in reactions) +
          f"; median {statistics.median(reactions):.2f} s (goal <= 1 s; polling: up to INTERVAL=15 s plus a pass)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
