#!/usr/bin/env python3
"""Tenant-size benchmark (issue 26): the peak RSS of one real pass when tenants write the largest objects the
API server accepts.

    python bench/tenants.py            # 24 pods of 1.4 MB managedFields on a dead node, and 120
    python bench/tenants.py --pods 24 --reconcile /tmp/old/reconcile.py   # another checkout, for a before

Each pod carries `metadata.managedFields` of about 1.4 MB (a tenant's own client writes them; under the API
server's 1.5 MiB object limit with the rest of the pod), with a bound RWO claim attached on the dead node,
next to five live nodes. One `reconcile.py --once` runs as a subprocess through bench/launch.py (its own
peak RSS, from wait4), as in production; the pass must free every pod (it exits non-zero otherwise). The
goal is <= 128 MiB; both manifests limit the container to 256Mi.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import FakeApiServer
from rwo_testkit.managed_fields import bulky, hostile_entry

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from scale import measure, pass_env  # noqa: E402 -- after sys.path.insert

MAX_OBJECT_BYTES = 1_400_000


def run(pods: int, reconcile: Path) -> tuple[float, float, int, bool]:
    """(wall s, peak RSS MiB, bytes received, every pod freed) of one pass over `pods` maximum-size pods."""
    names = [f"big-{i}" for i in range(pods)]
    with FakeApiServer() as api, tempfile.TemporaryDirectory() as tmp:
        fc.outage(api, pods=names, live=5)
        padding = [hostile_entry(bulky(MAX_OBJECT_BYTES))]
        for name in names:
            pod = api.get("pods", name, "default")
            pod["metadata"]["managedFields"] = padding
            api.add(pod)
        size = max(len(raw) for raw in api.store["pods"].values())
        env = dict(pass_env(api.write_kubeconfig(os.path.join(tmp, "kubeconfig"))), MAX_PODS_PER_PASS=str(pods))
        ours = measure(api, [sys.executable, str(reconcile), "--once"], env)
        freed = all(api.get("pods", name, "default") is None for name in names)
        if ours.code != 0 or not freed:
            print(ours.output[-2000:])
        print(f"{pods:>5} pods of {size / 1e6:.2f} MB: wall {ours.wall:.2f} s, peak RSS {ours.rss_mb:.0f} MiB, "
              f"{ours.bytes_received / 1e6:.0f} MB received, list pods limits "
              f"{[int(r.query['limit']) for r in api.requests if r.verb == 'list' and r.resource == 'pods']}, "
              f"exit {ours.code}, {'all freed' if freed else 'NOT all freed'}")
        return ours.wall, ours.rss_mb, ours.bytes_received, freed and ours.code == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, nargs="*", default=[24, 120])
    parser.add_argument("--reconcile", type=Path, default=ROOT / "reconcile.py", help="the pass to measure")
    args = parser.parse_args()
    print(f"# rwo-failover tenant-size benchmark, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores")
    print(f"pass: {args.reconcile}")
    results = [run(n, args.reconcile) for n in args.pods]
    return 0 if all(ok for *_, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())
