"""Where one failover's time goes: each phase's first moment, in seconds from power-off.

Two witnesses, both on this machine's clock. The cluster side is polled every POLL_SECONDS by a thread of its
own (its own client, the admin's kubeconfig): the node NotReady, its shutdown and out-of-service taints, the
old pod gone, the attachment on the dead node gone, the replacement scheduled, its volume attached, the
replacement Running and Ready. rwo-failover's side is read from its JSON pass log afterwards: the first node
verdict naming the node (its shutdown taint, or with redfish its silent Lease, seen) and the first verdict
`down` (proven down). A phase never reached stays None. Each figure is the first poll that saw it, so it is
late by up to POLL_SECONDS plus a GET.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import threading
import time
from datetime import datetime
from pathlib import Path

from rwo_testkit.e2e import CLOUD_TAINT, OOS_KEY
from rwo_testkit.kube import Kube

POLL_SECONDS = 0.25
PHASES = ("NotReady", "shutdown taint", "first verdict", "proven down", "out-of-service taint", "pod deleted",
          "attachment released", "scheduled", "attached", "Running")
PROVEN_DOWN = "down"  # planner.types.NodeState.DOWN's value in the "node verdict" log line


class Timeline:
    """Polls the cluster from power-off (`start`) until `stop`; `phases` maps each phase seen to its seconds."""

    def __init__(self, kubeconfig: Path, namespace: str, pod: str, *, node: str, pv: str, old_uid: str) -> None:
        self.kube = Kube(kubeconfig)
        self.namespace, self.pod, self.node, self.pv, self.old_uid = namespace, pod, node, pv, old_uid
        self.phases: dict[str, float] = {}
        self.off_monotonic, self.off_wall = 0.0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="timeline", daemon=True)

    def start(self) -> None:
        """Call at power-off: every figure is counted from this moment."""
        self.off_monotonic, self.off_wall = time.monotonic(), time.time()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _seen(self, phase: str, now: float) -> None:
        self.phases.setdefault(phase, now - self.off_monotonic)

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            with contextlib.suppress(Exception):
                self._poll(now)
            self._stop.wait(POLL_SECONDS)

    def _poll(self, now: float) -> None:
        node = self.kube.get(f"/api/v1/nodes/{self.node}") or {}
        ready = next((c.get("status") for c in (node.get("status") or {}).get("conditions") or ()
                      if c.get("type") == "Ready"), "")
        if node and ready != "True":
            self._seen("NotReady", now)
        keys = {t.get("key") for t in (node.get("spec") or {}).get("taints") or ()}
        if CLOUD_TAINT["key"] in keys:
            self._seen("shutdown taint", now)
        if OOS_KEY in keys:
            self._seen("out-of-service taint", now)
        pod = self.kube.get(f"/api/v1/namespaces/{self.namespace}/pods/{self.pod}")
        uid = (pod or {}).get("metadata", {}).get("uid")
        if uid != self.old_uid:
            self._seen("pod deleted", now)
        new_node = (pod or {}).get("spec", {}).get("nodeName") if uid and uid != self.old_uid else None
        if new_node:
            self._seen("scheduled", now)
            if any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in (pod or {}).get("status", {}).get("conditions") or ()):
                self._seen("Running", now)
        self._attachments(now, new_node)

    def _attachments(self, now: float, new_node: str | None) -> None:
        mine = [va for va in self.kube.items("/apis/storage.k8s.io/v1/volumeattachments")
                if va["spec"]["source"].get("persistentVolumeName") == self.pv]
        if not any(va["spec"]["nodeName"] == self.node for va in mine):
            self._seen("attachment released", now)
        if new_node and any(va["spec"]["nodeName"] == new_node and (va.get("status") or {}).get("attached")
                            for va in mine):
            self._seen("attached", now)

    def read_passes(self, log: Path | None) -> None:
        """rwo-failover's own phases, from the JSON lines of its pass log written since power-off."""
        for line in _lines(log):
            if line.get("message") != "node verdict" or line.get("node") != self.node:
                continue
            at = _wall(line.get("time", ""))
            if at is None or at < self.off_wall:
                continue
            self.phases.setdefault("first verdict", at - self.off_wall)
            if line.get("state") == PROVEN_DOWN:
                self.phases.setdefault("proven down", at - self.off_wall)


def _lines(log: Path | None) -> list[dict]:
    if log is None or not log.exists():
        return []
    found = []
    for text in log.read_text(errors="replace").splitlines():
        try:
            line = json.loads(text)
        except ValueError:
            continue
        if isinstance(line, dict):
            found.append(line)
    return found


def _wall(stamp: str) -> float | None:
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except (TypeError, ValueError):
        return None


def median_phases(timelines: list[dict[str, float]]) -> dict[str, float | None]:
    """Each phase's median over the runs that reached it; None when none did."""
    out: dict[str, float | None] = {}
    for phase in PHASES:
        seen = [t[phase] for t in timelines if phase in t]
        out[phase] = statistics.median(seen) if seen else None
    return out


def print_phases(results: dict[str, list[dict[str, float]]]) -> None:
    """The Markdown table: one row per approach, one column per phase, medians in seconds from power-off."""
    print("| Approach | " + " | ".join(PHASES) + " |")
    print("|---" * (len(PHASES) + 1) + "|")
    for approach, timelines in results.items():
        medians = median_phases(timelines)
        cells = ["-" if medians[p] is None else f"{medians[p]:.1f}" for p in PHASES]
        print(f"| {approach} | " + " | ".join(cells) + " |")
