#!/usr/bin/env python3
"""What receiving one node watch event costs continuous mode: CPU per event, measured apart.

    nice -n 10 .venv/bin/python bench/intake.py                  # 5,000 nodes, 1,000 events a minute, 2 min
    .venv/bin/python bench/intake.py --nodes 500 --minutes 0.5   # a quick look

The fixture API server holds --nodes nodes as the scale benchmark builds them (about 9.8 KB of JSON each)
and plays the kubelets' status reports at --rate a minute (each node's heartbeat times move, nothing a pass
judges). A child process runs only the reflector of continuous mode's node watch (kube.reflector.Reflector with the
NODES source, over the real client and transport), as reconcile.py does; after its first list, its own CPU
(utime + stime, every thread) is measured over --minutes. Printed: CPU seconds a minute, and per event.

`--floor` runs, instead of the reflector, the least any watcher of nodes in Python does per event: one plain
HTTP connection (http.client, no client library, no TLS), the chunked stream read by hand, each line decoded by
msgspec into its type and resourceVersion and nothing more, no cache. What it costs per event is a floor for
receiving the kubelets' status reports at all, whatever is done with them (docs/performance.md compares it with
polling). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))


def consume(kubeconfig: str, minutes: float) -> None:
    """The child: a node reflector as continuous mode runs it; prints its CPU over the window as JSON."""
    from rwo_failover import settings as config
    from rwo_failover.kube import Api, load_api_client
    from rwo_failover.kube.reflector import Reflector
    from rwo_failover.kube.sources import NODES

    settings = config.load(["--interval", "15"], {"KUBECONFIG": kubeconfig})[1]
    api_client = load_api_client(settings)
    changes: list[str] = []
    found = Reflector(NODES, lambda: Api(api_client, settings), settings, on_change=changes.append)
    found.start()
    found.current(found.new_api())
    time.sleep(2)  # the watch is open
    before, events0 = resource.getrusage(resource.RUSAGE_SELF), found.events
    time.sleep(minutes * 60)
    after = resource.getrusage(resource.RUSAGE_SELF)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    print(json.dumps({"cpu": user + system, "user": user, "system": system, "events": found.events - events0,
                      "changes": len(changes)}), flush=True)
    found.stop()


class Meta(msgspec.Struct, frozen=True):
    resourceVersion: str = ""


class Obj(msgspec.Struct, frozen=True):
    metadata: Meta = Meta()


class Event(msgspec.Struct):  # what --floor decodes of each event: its type and version, nothing more
    type: str = ""
    object: Obj = Obj()


def floor(url: str, token: str, minutes: float) -> None:
    """The child of --floor: the least work per watch event (see the docstring); prints its CPU as JSON."""
    import http.client
    from urllib.parse import urlsplit

    decode, headers = msgspec.json.Decoder(Event).decode, {"Authorization": f"Bearer {token}"}
    place = urlsplit(url)
    connection = http.client.HTTPConnection(place.hostname, place.port)
    connection.request("GET", "/api/v1/nodes?limit=1", headers=headers)
    version = json.loads(connection.getresponse().read())["metadata"]["resourceVersion"]
    connection.request("GET", f"/api/v1/nodes?watch=1&resourceVersion={version}&timeoutSeconds=3600", headers=headers)
    stream, pending, events = connection.getresponse().fp, b"", 0
    time.sleep(2)
    before, ends = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() + minutes * 60
    while time.monotonic() < ends:
        pending += stream.read(int(stream.readline(), 16) + 2)[:-2]  # one chunk: its size line, data, CRLF
        while b"\n" in pending:
            line, _, pending = pending.partition(b"\n")
            decode(line)
            events += 1
    after = resource.getrusage(resource.RUSAGE_SELF)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    print(json.dumps({"cpu": user + system, "user": user, "system": system, "events": events, "changes": 0}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--rate", type=float, default=1000.0, help="node status reports a minute")
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--floor", action="store_true", help="the least a watcher does per event (docstring)")
    parser.add_argument("--consume", nargs=2, metavar=("KUBECONFIG", "MINUTES"), help=argparse.SUPPRESS)
    parser.add_argument("--consume-floor", nargs=2, metavar=("URL", "MINUTES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.consume:
        consume(args.consume[0], float(args.consume[1]))
        return 0
    if args.consume_floor:
        from rwo_testkit.fake_apiserver import TOKEN
        floor(args.consume_floor[0], TOKEN, float(args.consume_floor[1]))
        return 0

    from steady import Kubelets

    from rwo_testkit import fake_cluster as fc
    from rwo_testkit.fake_apiserver import FakeApiServer

    print(f"# rwo-failover watch intake, {time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} "
          f"cores, Python {platform.python_version()}", flush=True)
    with FakeApiServer() as api, tempfile.TemporaryDirectory() as tmp:
        for i in range(args.nodes):
            api.add(fc.node(f"node-{i:05d}", ready="True", since=86400, images=40))
        size = sum(map(len, api.store["nodes"].values())) / args.nodes
        kubeconfig = api.write_kubeconfig(os.path.join(tmp, "kubeconfig"))
        kubelets = Kubelets(api, sorted(api.store["nodes"]), every=args.nodes / max(args.rate, 1e-9) * 60)
        if args.rate > 0:
            kubelets.start()
        how = ["--consume-floor", api.url] if args.floor else ["--consume", kubeconfig]
        child = subprocess.run([sys.executable, __file__, *how, str(args.minutes)], cwd=ROOT,
                               capture_output=True, text=True, check=False, timeout=args.minutes * 60 + 600)
        kubelets.stop.set()
    if child.returncode != 0:
        print(child.stderr[-3000:], file=sys.stderr)
        return 1
    found = json.loads(child.stdout.strip().splitlines()[-1])
    per_minute = found["cpu"] / args.minutes
    print(f"{args.nodes:,} nodes of {size / 1000:.1f} KB, status reports at {args.rate:,.0f} a minute, "
          f"{args.minutes:g} min: {found['events']:,} events received, {found['changes']} that matter to a pass")
    print(f"{'floor (--floor)' if args.floor else 'reflector'} process CPU: {per_minute:.3f} s/min "
          f"({found['user'] / args.minutes:.3f} user, {found['system'] / args.minutes:.3f} system), "
          f"{found['cpu'] / max(1, found['events']) * 1e3:.3f} ms per event (all threads, idle included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
