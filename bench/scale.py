#!/usr/bin/env python3
"""Scale benchmark: one real `reconcile.py --once` pass against the fake API server at Kubernetes' limits.

    python bench/scale.py                 # 5,000 nodes and 150,000 pods, plus the scaling curve
    python bench/scale.py --nodes 500 --no-curve --no-naive   # the CI smoke: correctness at 500 nodes

The cluster is realistic in size: nodes ~9 KB of JSON (40 images, 5 conditions, nodeInfo), 30 pods a node
of 4-6 KB each, 4 PVCs and PVs a node (60% RWO) each attached by a VolumeAttachment, and 10 nodes that
carry the shutdown taint, NotReady with stale Leases, holding 30 stuck pods each, half with RWO claims.

Reported for our pass (a subprocess, as in production): wall time, peak RSS, API requests by verb and
resource from the fixture's request log, bytes received, and correctness (exactly the expected pods and
VolumeAttachments deleted). Two references run in the same process run, on the same fixture:
  naive - list all pods cluster-wide and all nodes through the client's default model deserialization,
          then filter in Python;
  floor - fetch exactly what a pass must read (the node list, the Leases of tainted nodes, the pods of the
          proven-down nodes, their claims and PVs, the VolumeAttachment list) and parse it with bare
          json.loads, nothing else (bench/references.py).
Exits non-zero if the pass was not correct, or made more requests of a kind than its work needs
(request_bounds); timing targets are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import FakeApiServer

ROOT = Path(__file__).resolve().parent.parent

PODS_PER_NODE = 30
CLAIMS_PER_NODE = 4
DEAD_NODES = 10
NAMESPACES = [f"team-{i:02d}" for i in range(40)]


def rich_pod(name: str, node: str, namespace: str, *, rng: random.Random, **kwargs) -> dict:
    """fc.pod plus what real pods carry (env, a sidecar, probes, tolerations): 4-6 KB of JSON."""
    pod = fc.pod(name, node, namespace=namespace, **kwargs)
    spec = pod["spec"]
    main = spec["containers"][0]
    main["env"] = [{"name": f"APP_SETTING_{i:02d}", "value": f"value-{rng.randrange(10**8):08d}-{i}"}
                   for i in range(rng.randint(22, 48))]
    main["ports"] = [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    main["livenessProbe"] = {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10}
    main["readinessProbe"] = {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5}
    spec["containers"].append({"name": "log-shipper", "image": "registry.example.com/infra/fluent-bit:3.1.4",
                               "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
                               "args": ["--config", "/etc/fluent-bit/fluent-bit.conf"]})
    spec["tolerations"] = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                            "tolerationSeconds": 300},
                           {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                            "tolerationSeconds": 300}]
    spec["schedulerName"] = "default-scheduler"
    spec["dnsPolicy"] = "ClusterFirst"
    pod["metadata"]["labels"].update({"team": namespace, "pod-template-hash": f"{rng.randrange(16**10):010x}"})
    pod["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"] = "2026-11-01T10:00:00Z"
    return pod


@dataclass
class Expected:
    pods: set[str] = field(default_factory=set)         # "namespace/name"
    attachments: set[str] = field(default_factory=set)  # VolumeAttachment names


def load(api: FakeApiServer, nodes: int, seed: int = 1, *, dead_nodes: int = DEAD_NODES) -> Expected:
    """Seed the fixture; return what a correct pass deletes."""
    rng = random.Random(seed)
    expected = Expected()
    dead = {f"node-{i:05d}" for i in rng.sample(range(nodes), dead_nodes)}
    for i in range(nodes):
        name = f"node-{i:05d}"
        if name in dead:
            api.add(fc.node(name, ready="Unknown", since=900, images=40,
                            taints=[fc.SHUTDOWN, fc.UNREACHABLE]))
            api.add(fc.lease(name, 940))
            _stuck_pods(api, name, rng, expected=expected)
        else:
            api.add(fc.node(name, ready="True", since=86400, images=40))
            api.add(fc.lease(name, rng.uniform(0, 10)))
            _healthy_pods(api, name, rng)
    return expected


def _healthy_pods(api: FakeApiServer, node: str, rng: random.Random) -> None:
    for p in range(PODS_PER_NODE):
        namespace = rng.choice(NAMESPACES)
        pod_name = f"app-{node[5:]}-{p:02d}"
        claims = []
        if p < CLAIMS_PER_NODE:
            claim = f"data-{pod_name}"
            modes = ("ReadWriteOnce",) if rng.random() < 0.6 else ("ReadWriteMany",)
            fc.add_volume(api, claim, namespace=namespace, modes=modes, attached_to=node)
            claims = [claim]
        api.add(rich_pod(pod_name, node, namespace, rng=rng, claims=claims, ready="True",
                         owner=rng.choice(["ReplicaSet", "StatefulSet"])))


def _stuck_pods(api: FakeApiServer, node: str, rng: random.Random, *, expected: Expected) -> None:
    for p in range(PODS_PER_NODE):
        namespace = rng.choice(NAMESPACES)
        pod_name = f"db-{node[5:]}-{p:02d}"
        claims = []
        if p % 2 == 0:
            claim = f"data-{pod_name}"
            _, _, va = fc.add_volume(api, claim, namespace=namespace, attached_to=node)
            claims = [claim]
            expected.pods.add(f"{namespace}/{pod_name}")
            expected.attachments.add(va["metadata"]["name"])
        elif p % 4 == 1:
            claim = f"shared-{pod_name}"
            fc.add_volume(api, claim, namespace=namespace, modes=("ReadWriteMany",), attached_to=node)
            claims = [claim]
        api.add(rich_pod(pod_name, node, namespace, rng=rng, claims=claims, terminating=True, ready="False",
                         owner="StatefulSet"))


@dataclass
class Measured:
    wall: float
    rss_mb: float
    requests: Counter
    bytes_received: int
    output: str
    code: int
    writes: int = 0  # requests that could change something (a server-side dry run, ?dryRun=All, changes nothing)


def measure(api: FakeApiServer, command: list[str], env: dict) -> Measured:
    """Run one program through bench/launch.py; its wall time, true peak RSS and the requests it made."""
    before = len(api.requests)
    with tempfile.NamedTemporaryFile("r", suffix=".json") as report:
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, str(ROOT / "bench" / "launch.py"), report.name, *command],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
        wall = time.perf_counter() - started
        result = json.load(report)
    output = proc.stdout
    made = api.requests[before:]
    writes = sum(1 for r in made if r.could_change)
    # A list's later pages (a continue token) are counted apart: how many a list takes is the cluster's size.
    kinds = Counter(("list, next page" if r.verb == "list" and r.query.get("continue") else r.verb, r.resource)
                    for r in made)
    return Measured(wall, result["maxrss_kb"] / 1024, kinds,
                    sum(r.response_bytes for r in made), output.decode(errors="replace"), result["code"], writes)


def request_bounds(expected: Expected, dead_nodes: int = DEAD_NODES) -> dict[tuple[str, str], int]:
    """The most requests of each kind a correct run may make for this much work (the CI smoke fails past one): a
    live re-check (its node and Lease) before each release and each write on a dead node, an Event per pod, claim
    and node, a recovery record per pod; every list at most once per pass (a run makes up to 3, run/once.py); the
    control ConfigMap read when a pass starts, before its first write and once a second of writing
    (act/control.py), our taint records once a second per node (act/taint_records.py). What is not here is never
    asked for."""
    work = len(expected.pods) + len(expected.attachments)
    per_node = 4 * dead_nodes
    passes = 3
    return {("get", "nodes"): work + per_node + 10, ("get", "leases"): work + per_node + 10,
            ("delete", "pods"): len(expected.pods), ("delete", "volumeattachments"): len(expected.attachments),
            ("create", "events"): work + per_node + 10, ("create", "configmaps"): len(expected.pods) + per_node,
            ("patch", "nodes"): 2 * dead_nodes, ("patch", "configmaps"): per_node,
            ("list", "configmaps"): passes * 4 + 2 * dead_nodes + 10, ("list", "nodes"): 2 * passes,
            ("list", "pods"): passes * dead_nodes, ("list", "persistentvolumeclaims"): passes,
            ("list", "persistentvolumes"): passes, ("list", "volumeattachments"): passes,
            ("list", "leases"): passes, ("version", ""): passes}


def over_bounds(requests: Counter, bounds: dict[tuple[str, str], int]) -> list[str]:
    """Each kind of request made more often than its bound; a list's later pages follow its first, bounded."""
    return [f"{verb} {resource}: {n} requests, more than the {bounds.get((verb, resource), 0)} this work needs"
            for (verb, resource), n in sorted(requests.items())
            if verb != "list, next page" and n > bounds.get((verb, resource), 0)]


def pass_env(kubeconfig: str) -> dict:
    return {"KUBECONFIG": kubeconfig, "PATH": os.environ.get("PATH", ""), "LOG_FORMAT": "json",
            "LOG_LEVEL": "WARNING", "MAX_NODES_PER_PASS": str(DEAD_NODES), "MAX_PODS_PER_PASS": "200",
            "PASS_TIMEOUT_SECONDS": "600", "REQUEST_TIMEOUT_SECONDS": "120"}


def check(api: FakeApiServer, expected: Expected, *, pods_before: set[str], atts_before: set[str]) -> list[str]:
    pods_after = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in api.objects("pods")}
    api.attacher.detach()  # the CSI attacher's finalizer holds a deleted attachment until it has detached
    atts_after = set(api.store["volumeattachments"])
    problems = []
    if pods_before - pods_after != expected.pods:
        problems.append(f"pods deleted {len(pods_before - pods_after)}, expected {len(expected.pods)}")
    if atts_before - atts_after != expected.attachments:
        problems.append(f"attachments deleted {len(atts_before - atts_after)}, expected {len(expected.attachments)}")
    return problems


def needs(api: FakeApiServer, path: str) -> str:
    """What a pass must read on this cluster, for the floor reference: written to `path` as JSON."""
    nodes = [json.loads(raw) for raw in api.store["nodes"].values()]
    tainted = sorted(n["metadata"]["name"] for n in nodes if n["spec"].get("taints"))
    down = set(tainted)  # every tainted node in this fixture is provably down
    pods = [p for p in (json.loads(raw) for raw in api.store["pods"].values()) if p["spec"]["nodeName"] in down]
    claims = sorted({(p["metadata"]["namespace"], v["persistentVolumeClaim"]["claimName"]) for p in pods
                     for v in p["spec"]["volumes"] if v.get("persistentVolumeClaim")})
    volumes = {json.loads(api.store["persistentvolumeclaims"][f"{ns}/{name}"])["spec"]["volumeName"]
               for ns, name in claims}
    volumes |= {json.loads(raw)["spec"]["source"]["persistentVolumeName"]
                for raw in api.store["volumeattachments"].values() if json.loads(raw)["spec"]["nodeName"] in down}
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"tainted": tainted, "down": sorted(down), "claims": claims, "volumes": sorted(volumes)}, handle)
    return path


def run_size(nodes: int, naive: bool) -> dict:
    with FakeApiServer() as api, tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        expected = load(api, nodes)
        loaded = time.perf_counter() - t0
        kubeconfig = api.write_kubeconfig(os.path.join(tmp, "kubeconfig"))
        env = pass_env(kubeconfig)
        pods_before = {f"{ns}/{n}" for ns, n in (k.split("/") for k in api.store["pods"])}
        atts_before = set(api.store["volumeattachments"])
        sizes = {kind: sum(map(len, api.store[kind].values())) / max(1, len(api.store[kind]))
                 for kind in ("nodes", "pods")}
        api.requests.clear()
        # The floor and naive references run first, on the untouched cluster.
        need = needs(api, os.path.join(tmp, "needs.json"))
        floor_command = [sys.executable, str(ROOT / "bench" / "references.py"), "floor", kubeconfig, need]
        floor = measure(api, floor_command, env)
        naive_run = measure(api, [sys.executable, str(ROOT / "bench" / "references.py"), "naive", kubeconfig],
                            env) if naive else None
        # Dry-run first: the same reads and re-checks, no writes; it shows what the read path alone costs.
        dry = measure(api, [sys.executable, str(ROOT / "reconcile.py"), "--once"], dict(env, DRY_RUN="true"))
        ours = measure(api, [sys.executable, str(ROOT / "reconcile.py"), "--once"], env)
        # The floor runs again last; the faster of its two runs is kept, which can only make our ratio worse.
        again = measure(api, floor_command, env)
        floor = min(floor, again, key=lambda m: m.wall)
        problems = check(api, expected, pods_before=pods_before, atts_before=atts_before)
        if ours.code != 0:
            problems.append(f"reconcile.py exited {ours.code}: {ours.output[-2000:]}")
        problems += over_bounds(ours.requests, request_bounds(expected))
        if dry.code != 0 or dry.writes:
            problems.append(f"the dry-run pass exited {dry.code} or wrote: {dict(dry.requests)}")
        return {"nodes": nodes, "pods": len(pods_before), "loaded_s": loaded, "sizes": sizes, "ours": ours,
                "dry": dry, "floor": floor, "naive": naive_run, "problems": problems, "expected": expected}


def table(result: dict) -> str:
    ours, dry, floor, naive = result["ours"], result["dry"], result["floor"], result["naive"]
    reads = sum(n for (verb, _), n in ours.requests.items() if verb in ("get", "list", "list, next page", "version"))
    writes = ours.writes  # the server-side dry run that reads the server's clock is neither
    lines = [f"{'':<14}{'wall s':>9}{'peak RSS MB':>13}{'requests':>10}{'MB received':>13}"]
    for name, m in (("ours", ours), ("ours dry-run", dry), ("naive", naive), ("floor", floor)):
        if m is not None:
            lines.append(f"{name:<14}{m.wall:>9.2f}{m.rss_mb:>13.0f}{sum(m.requests.values()):>10}"
                         f"{m.bytes_received / 1e6:>13.1f}")
    lines.append(f"our/floor wall: {ours.wall / floor.wall:.2f}x (target <= 1.5x); "
                 f"dry-run (reads only)/floor: {dry.wall / floor.wall:.2f}x")
    if naive is not None:
        lines.append(f"naive/ours wall: {naive.wall / ours.wall:.1f}x (target >= 10x)")
    lines.append(f"our reads: {reads} (target ~60), writes: {writes} "
                 f"(a delete per pod and attachment, an Event per pod, PVC and node, a taint patch per node)")
    lines.append("our requests by verb and resource: " +
                 ", ".join(f"{v} {r}: {n}" for (v, r), n in sorted(ours.requests.items())))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--no-curve", action="store_true", help="skip the 500/1,000/2,000-node scaling curve")
    parser.add_argument("--no-naive", action="store_true", help="skip the naive reference (slow at scale)")
    args = parser.parse_args()

    print(f"# rwo-failover scale benchmark, {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}")
    main_result = run_size(args.nodes, naive=not args.no_naive)
    ok = not main_result["problems"]
    sizes = main_result["sizes"]
    print(f"\n## {main_result['nodes']:,} nodes, {main_result['pods']:,} pods "
          f"(node {sizes['nodes'] / 1000:.1f} KB, pod {sizes['pods'] / 1000:.1f} KB average; "
          f"fixture loaded in {main_result['loaded_s']:.0f} s)")
    print(table(main_result))
    expected = main_result["expected"]
    print(f"correctness: {'OK' if ok else 'FAILED'}: expected {len(expected.pods)} pods and "
          f"{len(expected.attachments)} VolumeAttachments deleted and nothing else"
          + ("" if ok else f"; {'; '.join(main_result['problems'])}"))

    if not args.no_curve:
        curve = [run_size(n, naive=False) for n in (500, 1000, 2000) if n < args.nodes] + [main_result]
        print("\n## scaling curve (ours)")
        print(f"{'nodes':>7}{'pods':>9}{'wall s':>9}{'RSS MB':>9}{'requests':>10}{'floor s':>9}{'our/floor':>11}")
        for r in curve:
            o = r["ours"]
            print(f"{r['nodes']:>7,}{r['pods']:>9,}{o.wall:>9.2f}{o.rss_mb:>9.0f}{sum(o.requests.values()):>10}"
                  f"{r['floor'].wall:>9.2f}{o.wall / r['floor'].wall:>11.2f}")
            ok = ok and not r["problems"]
        first, last = curve[0], curve[-1]
        growth = (last["ours"].wall / first["ours"].wall) / (last["nodes"] / first["nodes"])
        print(f"time growth {first['nodes']:,} -> {last['nodes']:,} nodes, relative to linear: {growth:.2f} "
              "(<= 1 is linear or better)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
