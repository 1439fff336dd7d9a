"""`make demo` (`python -m rwo_testkit.demo`): a broken cluster like the ones in the write-ups, fixed
before your eyes.

It starts the fake API server on loopback, seeds a node that died holding a
StatefulSet pod and a Deployment pod with RWO volumes, runs a dry-run pass and
then a real pass with the real client, prints the cluster before and after, and
then what `kubectl rwo-failover status` says the install now holds.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import IO

from rwo_failover import settings as config
from rwo_failover.kube import Api, load_api_client
from rwo_failover.model import Node
from rwo_failover.observe.sightings import Sightings
from rwo_failover.run import logs, plan_table, status
from rwo_failover.run.exitcodes import EXIT_CONFIG
from rwo_failover.run.runner import run_pass
from rwo_failover.settings import Settings

from . import fake_cluster as fc
from .fake_apiserver import FakeApiServer

DEAD = "worker-3"


def _flush_logs() -> None:
    """The log lines so far, before the table that follows them."""
    for handler in logging.getLogger(logs.LOGGER).handlers:
        handler.flush()


def seed(api: FakeApiServer) -> None:
    for name in ("worker-0", "worker-1", "worker-2"):
        fc.live_node(api, name)
    fc.dead_node(api, DEAD, down_for=420)
    fc.add_volume(api, "data-postgres-0", namespace="shop", attached_to=DEAD)
    api.add(fc.pod("postgres-0", DEAD, namespace="shop", claims=["data-postgres-0"], terminating=True))
    fc.add_volume(api, "redis-data", namespace="shop", attached_to=DEAD)
    api.add(fc.pod("redis-7d9f8-x2k4q", DEAD, namespace="shop", claims=["redis-data"], owner="ReplicaSet",
                   phase="Unknown", reason="NodeLost"))
    api.add(fc.pod("redis-7d9f8-m8zt5", "worker-1", namespace="shop", claims=["redis-data"], owner="ReplicaSet",
                   phase="Pending"))
    api.add(fc.pod("web-6c5b9-qq7wz", DEAD, namespace="shop", owner="ReplicaSet", terminating=True))
    fc.add_volume(api, "uploads", namespace="shop", modes=("ReadWriteMany",), attached_to=DEAD)
    api.add(fc.pod("uploader-0", DEAD, namespace="shop", claims=["uploads"], terminating=True))
    fc.add_volume(api, "data-legacy-0", namespace="shop", attached_to=DEAD)
    api.add(fc.pod("legacy-0", DEAD, namespace="shop", claims=["data-legacy-0"], terminating=True,
                   annotations={"rwo-failover.io/opt-out": "true"}))
    api.add(fc.pod("node-exporter-8h2lk", DEAD, namespace="monitoring", owner="DaemonSet", terminating=True))


def show(api: FakeApiServer, out: IO[str], title: str) -> None:
    out.write(f"\n=== {title} ===\n")
    out.write(f"{'NODE':<10} {'READY':<8} TAINTS\n")
    for node in sorted(api.objects("nodes"), key=lambda n: n["metadata"]["name"]):
        ready = next(c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready")
        taints = ",".join(t["key"].split("/")[-1] for t in node["spec"].get("taints") or ()) or "-"
        out.write(f"{node['metadata']['name']:<10} {ready:<8} {taints}\n")
    out.write(f"\n{'POD':<32} {'NODE':<10} STATUS\n")
    for pod in sorted(api.objects("pods"), key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"])):
        status = "Terminating" if pod["metadata"].get("deletionTimestamp") else \
            pod["status"].get("reason") or pod["status"]["phase"]
        name = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        out.write(f"{name:<32} {pod['spec']['nodeName']:<10} {status}\n")
    out.write(f"\n{'VOLUMEATTACHMENT PV':<32} NODE\n")
    for va in sorted(api.objects("volumeattachments"), key=lambda v: v["spec"]["source"]["persistentVolumeName"]):
        out.write(f"{va['spec']['source']['persistentVolumeName']:<32} {va['spec']['nodeName']}\n")
    out.flush()


def run_demo(settings: Settings, out: IO[str]) -> int:
    if settings.log_format == "auto":
        logs.setup("text", settings.log_level, out)
    with FakeApiServer() as api, tempfile.TemporaryDirectory() as tmp:
        seed(api)
        demo_settings = dataclasses.replace(settings, kubeconfig=api.write_kubeconfig(os.path.join(tmp, "kc")),
                                            kube_context=None)
        show(api, out, f"before: {DEAD} died 7 minutes ago and carries the cloud shutdown taint")
        # A new process judges a node down only once it has itself seen it NotReady for MIN_NOT_READY_SECONDS
        # (observe/sightings.py): look, and wait that long, as a CronJob's pass does.
        sightings = Sightings()
        sightings.update(Node.from_json(n) for n in api.objects("nodes"))
        out.write(f"\n(this process first sees {DEAD} NotReady now, and waits MIN_NOT_READY_SECONDS="
                  f"{settings.min_not_ready_seconds}s of its own before it may call it down)\n")
        out.flush()
        time.sleep(settings.min_not_ready_seconds)
        for dry_run in (True, False):
            out.write(f"\n=== {'dry-run pass (DRY_RUN=true): the plan, nothing changes' if dry_run else 'real pass'}"
                      " ===\n")
            out.flush()
            step = dataclasses.replace(demo_settings, dry_run=dry_run)

            def table(plan, step=step) -> None:  # the table a person gets on a terminal (OUTPUT=auto)
                _flush_logs()
                out.write("\n" + plan_table.render(plan, step.dry_run) + "\n")
                out.flush()
            code = run_pass(Api(load_api_client(step), step), step, show=table if dry_run else None,
                            sightings=sightings)
            _flush_logs()
        # As on a real cluster, the CSI attacher then detaches each released volume: its finalizer held the deleted
        # VolumeAttachment until now.
        api.attacher.detach()
        show(api, out, "after: the stuck RWO pods are gone and their volumes are free to attach elsewhere")
        out.write("\n=== kubectl rwo-failover status: what it holds now, and why (read-only) ===\n\n")
        out.flush()
        before = len(api.requests)
        status.main(["--kubeconfig", demo_settings.kubeconfig], {}, stdout=out, stderr=out)
        assert all(r.method == "GET" for r in api.requests[before:]), "status only reads"
        out.write("\nLeft alone on purpose: the RWX pod, the opted-out pod (and its volume), the DaemonSet pod, "
                  "and the pod without volumes. No out-of-service taint either: it would let Kubernetes "
                  "force-delete the opted-out pod.\n"
                  f"Exit code of the real pass: {code} (0 = done). Run the tests with: make test\n")
    return code


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None,
         stdout: IO[str] | None = None) -> int:
    """Settings as for reconcile.py (LOG_FORMAT, OUT_OF_SERVICE_TAINT, ...); the cluster is the demo's own."""
    out = stdout or sys.stdout
    try:
        _args, settings = config.load(sys.argv[1:] if argv is None else argv,
                                      os.environ if environ is None else environ)
    except config.ConfigError as err:
        print(f"demo: configuration error: {err}", file=sys.stderr)
        return EXIT_CONFIG
    logs.setup(settings.log_format, settings.log_level, out)
    return run_demo(settings, out)


if __name__ == "__main__":
    sys.exit(main())
