"""What `rwo-failover status` reads of the install itself: its workload and env, and its last passes (the
CronJob's Jobs and their pods' exit codes, or the leader Lease and the leader's /readyz). GETs only."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from .. import settings as config
from ..kube import Api, ApiError
from ..settings import Settings

LABEL = "app.kubernetes.io/name=rwo-failover"
CONTAINER = "reconcile"
JOBS_SHOWN = 5
_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
POD_NAME = 253  # a pod's name is a DNS-1123 subdomain


def is_name(text: str, longest: int) -> bool:
    """A DNS-1123 name no longer than `longest` (63: a label, without dots; 253: a subdomain): what may go into an
    API path as one segment, and nothing that could leave it."""
    return 0 < len(text) <= longest and bool(_DNS_NAME.match(text)) and (longest > 63 or "." not in text)


INSTANCE = "app.kubernetes.io/instance"


class SeveralInstalls(Exception):
    """More than one install in the namespace, and none chosen: which one status reports is the operator's call."""

    def __init__(self, namespace: str, names: list[str], *, releases: set[str]) -> None:
        if len(releases) == 1:  # one release, both modes: a CronJob left behind when it moved to HA mode, say
            advice = (f"release {next(iter(releases))} runs as both; both pass and write, each on its own: delete "
                      "the one it no longer runs")
        else:
            advice = "choose one with --release"
        super().__init__(f"{len(names)} installs in {namespace} ({', '.join(names)}): {advice}")
        self.names = names


def find_install(api: Api, namespace: str, *, release: str | None = None) -> dict[str, Any]:
    """The install's workload in `namespace`: its CronJob or Deployment (by the chart's and kustomize's label), the
    one of release `release` (its app.kubernetes.io/instance label, else its name) when given; with its
    container's plain env (values from Secrets are not read). SeveralInstalls when more than one answers."""
    found: list[tuple[str, dict[str, Any]]] = []
    for kind, path in (("CronJob", f"/apis/batch/v1/namespaces/{namespace}/cronjobs"),
                       ("Deployment", f"/apis/apps/v1/namespaces/{namespace}/deployments")):
        try:
            listed = _get(api, "list", kind.lower() + "s", path=path, query=[("labelSelector", LABEL)])
        except ApiError as err:
            return {"kind": "", "name": "", "env": {}, "object": None,
                    "note": f"cannot list {kind}s in {namespace}: {err}"}
        found += [(kind, item) for item in (listed or {}).get("items") or () if _of_release(item, release)]
    if len(found) > 1:
        raise SeveralInstalls(namespace, sorted(f"{kind} {_release_of(item)}" for kind, item in found),
                              releases={_release_of(item) for _, item in found})
    if not found:
        which = f" of release {release}" if release else ""
        return {"kind": "", "name": "", "env": {}, "object": None,
                "note": f"no CronJob or Deployment labelled {LABEL}{which} in {namespace}"}
    kind, item = found[0]
    spec = item["spec"].get("jobTemplate", item)["spec"]["template"]["spec"]
    containers = spec.get("containers") or ()
    container: dict[str, Any] = next((c for c in containers if c.get("name") == CONTAINER), {})
    env = {e["name"]: e["value"] for e in container.get("env") or () if isinstance(e.get("value"), str)}
    return {"kind": kind, "name": item["metadata"]["name"], "env": env, "object": item, "note": ""}


def _release_of(item: dict[str, Any]) -> str:
    labels = item["metadata"].get("labels") or {}
    return str(labels.get(INSTANCE) or item["metadata"]["name"])


def _of_release(item: dict[str, Any], release: str | None) -> bool:
    return release is None or _release_of(item) == release


def last_passes(api: Api, install: dict[str, Any], settings: Settings) -> dict[str, Any]:
    if install["kind"] == "CronJob":
        return _jobs(api, install)
    if install["kind"] == "Deployment":
        return _leader(api, install, settings)
    return {"mode": "", "note": install["note"]}


def _jobs(api: Api, install: dict[str, Any]) -> dict[str, Any]:
    """The CronJob's last Jobs, newest first: when, how each ended, and its pod's exit code."""
    namespace, name = install["object"]["metadata"]["namespace"], install["name"]
    try:
        jobs = (_get(api, "list", "jobs", path=f"/apis/batch/v1/namespaces/{namespace}/jobs") or {}).get("items") or []
        pods = (_get(api, "list", "pods", path=f"/api/v1/namespaces/{namespace}/pods",
                     query=[("labelSelector", LABEL)]) or {}).get("items") or []
    except ApiError as err:
        return {"mode": "cronjob", "cronjob": name, "jobs": [], "note": f"cannot read its Jobs: {err}"}
    mine = [j for j in jobs if any(r.get("kind") == "CronJob" and r.get("name") == name
                                   for r in j["metadata"].get("ownerReferences") or ())]
    mine.sort(key=lambda j: j["metadata"].get("creationTimestamp", ""), reverse=True)
    found = []
    for job in mine[:JOBS_SHOWN]:
        job_name, status = job["metadata"]["name"], job.get("status") or {}
        ended = next((c for c in status.get("conditions") or () if c.get("type") in ("Complete", "Failed")
                      and c.get("status") == "True"), None)
        outcome = "running" if not ended and status.get("active") else \
            (ended or {}).get("type", "").lower() or "pending"
        codes = [code for pod in pods if (pod["metadata"].get("labels") or {}).get("job-name") == job_name
                 for code in _exit_codes(pod)]
        found.append({"job": job_name, "started": status.get("startTime", ""),
                      "finished": status.get("completionTime", "") or (ended or {}).get("lastTransitionTime", ""),
                      "outcome": outcome, "reason": (ended or {}).get("reason", ""),
                      "exit_codes": codes})
    suspended = bool(install["object"]["spec"].get("suspend"))
    return {"mode": "cronjob", "cronjob": name, "suspended": suspended,
            "last_schedule": (install["object"].get("status") or {}).get("lastScheduleTime", ""), "jobs": found,
            "note": "" if found else "no Job of it yet"}


def _exit_codes(pod: dict[str, Any]) -> list[int]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or ()
    return [s["state"]["terminated"]["exitCode"] for s in statuses
            if s.get("name") == CONTAINER and "terminated" in (s.get("state") or {})]


def _leader(api: Api, install: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """HA mode: who holds the leader Lease, when it was last renewed, and the leader's /readyz if reachable."""
    namespace, name = settings.leader_election_namespace, settings.leader_election_lease_name
    found: dict[str, Any] = {"mode": "ha", "deployment": install["name"], "lease": f"{namespace}/{name}"}
    try:
        lease = _get(api, "get", "leases", path=f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}")
    except ApiError as err:
        return {**found, "leader": "", "note": f"cannot read the leader Lease: {err}"}
    spec = (lease or {}).get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    found.update(leader=holder, renewed=spec.get("renewTime") or "")
    if not holder:
        return {**found, "readyz": "", "note": "no leader holds the Lease"}
    pod = holder.rsplit("_", 1)[0]  # the identity is <hostname>_<suffix>, and a pod's hostname is its name
    port = install["env"].get("METRICS_PORT", config.BY_NAME["METRICS_PORT"].default)
    if not is_name(pod, POD_NAME) or not port.isdigit():  # anyone who may update the Lease writes this
        return {**found, "readyz": "", "note": f"the leader's identity names no pod ({pod[:80]!r} is not a pod "
                                               "name): its /readyz is not asked for"}
    namespace = install["object"]["metadata"]["namespace"]
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(pod, safe='')}:{port}/proxy/readyz"
    try:
        found["readyz"] = api.call("get", "pods/proxy", "GET", path, attempts=1,
                                   decode=lambda body: body.decode("utf-8", "replace")) or ""
        found["note"] = ""
    except ApiError as err:
        found.update(readyz="", note=f"the leader's /readyz is not reachable through the API server: {err}")
    return found


def _get(api: Api, verb: str, what: str, *, path: str, query: list[tuple[str, str]] | None = None) -> Any:
    return api.call(verb, what, "GET", path, query=query or [])
