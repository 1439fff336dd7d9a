"""`rwo-failover status` (and `kubectl rwo-failover status`): what an install holds, and why, read from the cluster.

Strictly read-only. Every request goes through ReadOnlyApi, which refuses anything but GET before it is sent (the
server-clock cross-check's dry-run create included: the Date header is trusted alone, as when RBAC denies it),
and a human's ClusterRole for it grants only get, list and watch (deploy/components/status-viewer/rbac.yaml).

The judgment is the real one: observe and the planner, exactly as a dry-run pass (runner.decide), with the
settings of the install found in the namespace (its CronJob's or Deployment's env), so a verdict here is the one
the next pass would give. What would lift a taint or a fence is the planner's own reason, from the plan. The
install's last passes come from its Jobs (CronJob mode) or its leader Lease and the leader's /readyz through the
API server's pod proxy (HA mode). status_view.py turns the result into text for people or JSON for scripts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import IO, Any

from .. import __version__
from .. import settings as config
from ..kube import Api, ApiError, Forbidden, load_api_client
from ..kube.clock import ServerClockUnknown
from ..model import BadObject, Snapshot
from ..observe.sightings import Sightings
from ..planner import NodeState, Plan
from ..planner.recovery import Record
from ..settings import Settings
from . import logs, status_install, status_view
from .exitcodes import EXIT_CONFIG, EXIT_FORBIDDEN, EXIT_OK, EXIT_UNAVAILABLE
from .runner import decide

# The install's settings that say how it judges and where it keeps its state; the rest (how to reach the API,
# logging, files only its pods can read, the loop's timing) come from here, not from the install.
NOT_FROM_THE_INSTALL = frozenset({
    "KUBECONFIG", "KUBE_CONTEXT", "LOG_FORMAT", "LOG_LEVEL", "OUTPUT", "DRY_RUN", "INTERVAL", "LEADER_ELECTION",
    "WATCH", "ONCE_WAIT_SECONDS", "METRICS_PORT", "PUSHGATEWAY_URL", "PUSHGATEWAY_INSTANCE", "PASS_TIMEOUT_SECONDS",
    "REQUEST_TIMEOUT_SECONDS", "API_MAX_ATTEMPTS", "FENCE_WEBHOOK_TOKEN_FILE", "FENCE_WEBHOOK_CA_FILE",
    "REDFISH_BMC_FILE"})


NAMESPACE_NAME = 63  # a namespace is a DNS-1123 label
STATUS_USER_AGENT = f"rwo-failover-status/{__version__}"


class ReadOnlyApi(Api):
    """An Api that sends nothing but GET: any other method is refused here, unsent, as Forbidden."""

    def call(self, verb: str, what: str, method: str, path: str,  # noqa: PLR0917 -- Transport.call's own signature
             *args: Any, **kwargs: Any) -> Any:
        if method != "GET":
            raise Forbidden(f"{verb} {what}: not sent, `rwo-failover status` is read-only (GET only)")
        return super().call(verb, what, method, path, *args, **kwargs)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rwo-failover status", description=(
        "What rwo-failover holds, and why: the pause and storm cool-down, every node judged, our taints and "
        "fences and what would lift them, pending recoveries, the last passes. Read-only."))
    parser.add_argument("-n", "--namespace", default=None,
                        help="the install's namespace (default: RECOVERY_NAMESPACE, else rwo-failover)")
    parser.add_argument("--release", default=None,
                        help="the install's release (its app.kubernetes.io/instance), when a namespace holds several")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--context", default=None)
    return parser


def main(argv: Sequence[str], environ: Mapping[str, str] | None = None, *, stdout: IO[str] | None = None,
         stderr: IO[str] | None = None) -> int:
    """`rwo-failover status [-n NAMESPACE] [--release NAME] [-o text|json]`: the exit code is 0 once it could say
    anything; 2 for a bad argument, or several installs in the namespace and no --release."""
    environ = dict(os.environ if environ is None else environ)
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    try:
        args = _parser().parse_args(list(argv))
    except SystemExit as done:
        return EXIT_OK if done.code == 0 else EXIT_CONFIG
    namespace = args.namespace or environ.get("RECOVERY_NAMESPACE") or "rwo-failover"
    if not status_install.is_name(namespace, NAMESPACE_NAME):  # it goes into every path: nothing but a name
        print(f"rwo-failover status: configuration error: -n {namespace[:80]!r} is not a namespace name",
              file=stderr)
        return EXIT_CONFIG
    access = {**environ, "KUBECONFIG": args.kubeconfig or environ.get("KUBECONFIG", ""),
              "KUBE_CONTEXT": args.context or environ.get("KUBE_CONTEXT", "")}
    logs.setup("json", "ERROR", stderr)  # a pass's log lines (a warning about the clock check) are not the report
    try:
        _, local = config.load([], _as_status(access, {}, namespace))
        client = load_api_client(local)
        client.user_agent = STATUS_USER_AGENT  # audit logs tell a human's reads from an install's passes
        api = ReadOnlyApi(client, local)
    except config.ConfigError as err:
        print(f"rwo-failover status: configuration error: {err}", file=stderr)
        return EXIT_CONFIG
    try:
        found = gather(api, local, namespace, environ=access, release=args.release)
    except status_install.SeveralInstalls as err:
        print(f"rwo-failover status: {err}", file=stderr)
        return EXIT_CONFIG
    except (ApiError, ServerClockUnknown) as err:
        print(f"rwo-failover status: cannot read the cluster: {err}", file=stderr)
        return EXIT_FORBIDDEN if isinstance(err, Forbidden) else EXIT_UNAVAILABLE
    stdout.write(status_view.as_json(found) if args.output == "json" else status_view.as_text(found))
    return EXIT_OK


PLUGIN_USAGE = ("kubectl rwo-failover is read-only: kubectl rwo-failover status [-n NAMESPACE] [--release NAME] "
                "[-o text|json], "
                "kubectl rwo-failover version, kubectl rwo-failover --help. A pass runs only as the install's "
                "CronJob or Deployment, never from here.")


def plugin_main(argv: Sequence[str] | None = None) -> int:
    """`kubectl rwo-failover ...`: kubectl runs this executable (kubectl-rwo_failover) with what follows. It only
    reads: `status`, `version` and `--help`; anything else exits 2 before any request, so a human's credentials
    and this machine's defaults never reach a pass (deploy/krew/kubectl-rwo_failover keeps the same rule)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    first = argv[0] if argv else ""
    if first == "status":
        return main(argv[1:])
    if first == "version":
        print(f"rwo-failover {__version__}")
        return EXIT_OK
    if first in ("-h", "--help", "help"):
        print(PLUGIN_USAGE)
        _parser().print_help()
        return EXIT_OK
    print(f"kubectl rwo-failover: {first!r} refused. {PLUGIN_USAGE}", file=sys.stderr)
    return EXIT_CONFIG


SHOWN_AS_WATCHED_SECONDS = 86400.0
BMC_STAND_IN = {"status.invalid": {"endpoint": "https://status.invalid/redfish/v1/Systems/none", "username": "-",
                                   "password": "-", "serial": "status-stand-in"}}


def _as_status(environ: Mapping[str, str], install: Mapping[str, str], namespace: str) -> dict[str, str]:
    """The environment status judges with: the install's judgment settings over this one's, as a dry run."""
    env = {k: v for k, v in environ.items() if k in config.BY_NAME}
    env.setdefault("RECOVERY_NAMESPACE", namespace)
    env.update({k: v for k, v in install.items() if k in config.BY_NAME and k not in NOT_FROM_THE_INSTALL})
    env.update(DRY_RUN="true", INTERVAL="0", LEADER_ELECTION="false", OUTPUT="none", LOG_FORMAT="json",
               LOG_LEVEL="ERROR", PUSHGATEWAY_URL="", FENCE_WEBHOOK_TOKEN_FILE="", FENCE_WEBHOOK_CA_FILE="")
    return env


def gather(api: Api, local: Settings, namespace: str, *, environ: Mapping[str, str],
           release: str | None = None) -> dict[str, Any]:
    """Everything the report says, as plain data (status_view renders it)."""
    install = status_install.find_install(api, namespace, release=release)
    settings, source = _install_settings(local, install, namespace, environ=environ)
    # Status acts on nothing and has watched nothing: it shows each verdict by the API server's stamps, as a pass
    # that had been watching all along would judge it (a new pass also waits to see the NotReady itself).
    sightings = Sightings(watched_for=SHOWN_AS_WATCHED_SECONDS)
    snapshot, plan = decide(api, settings, api.server_clock.now, sightings=sightings)
    now = snapshot.now
    found = {"namespace": namespace, "now": _iso(now), "install": {k: install[k] for k in ("kind", "name", "note")},
             "settings": source, "pause": _pause(snapshot), "storm": _storm(snapshot, settings),
             "refusal": {"kind": plan.refusal.kind.value, "message": plan.refusal.message} if plan.refusal else None,
             "nodes": [{"node": v.node, "verdict": v.state.value, "reason": v.reason, "taint": v.taint,
                        "not_ready_since": v.not_ready_since} for v in plan.verdicts],
             "would_release": {"pods": plan.pod_count, "attachments": plan.attachment_count},
             "held": held(snapshot, plan), "recoveries": recoveries(plan, now),
             "skipped": [{"kind": s.kind, "object": s.name, "reason": s.reason} for s in plan.skips],
             "unreadable": [f"{u.kind} {u.name}: {u.reason}" for u in snapshot.unreadable],
             "passes": status_install.last_passes(api, install, settings)}
    found["plan_table"] = status_view.plan_text(plan)
    return found


def _install_settings(local: Settings, install: dict[str, Any], namespace: str,
                      *, environ: Mapping[str, str]) -> tuple[Settings, str]:
    """The settings of the install (its judgment and where its state is), or these, saying which."""
    if not install["env"]:
        return local, f"this machine's settings (no install found in {namespace}: the defaults and the environment)"
    env = _as_status(environ, install["env"], namespace)
    with tempfile.TemporaryDirectory() as empty:
        if "REDFISH_BMC_FILE" in install["env"] or env.get("FENCING", "").strip().lower() == "redfish":
            # Status reads no Secret and asks no BMC: a map of one entry no node has stands in for the pods' file,
            # so that the install's settings load; the BMC map is read only to act (act/power.py).
            env["REDFISH_BMC_FILE"] = os.path.join(empty, "bmcs.json")
            with open(env["REDFISH_BMC_FILE"], "w", encoding="utf-8") as out:
                json.dump(BMC_STAND_IN, out)
        try:
            return config.load([], env)[1], f"the settings of {install['kind']} {namespace}/{install['name']}"
        except config.ConfigError as err:
            return local, f"this machine's settings (the install's could not be used: {err})"


def _pause(snapshot: Snapshot) -> dict[str, Any]:
    control = snapshot.control
    return {"paused": bool(control and control.paused), "switch": bool(control and control.switch_on),
            "by": control.paused_by if control else "",
            "since": _iso(control.paused_at) if control and control.paused_at else "",
            "reason": control.reason if control else "", "error": snapshot.control_error,
            "requests": [{"requester": r.requester, "since": _iso(r.at) if r.at else "", "reason": r.reason}
                         for r in (control.requests if control else ())]}


def _storm(snapshot: Snapshot, settings: Settings) -> dict[str, Any]:
    control = snapshot.control
    tripped, calm = (control.tripped_at, control.calm_since) if control else (None, None)
    until = calm + timedelta(seconds=settings.storm_cooldown_seconds) if calm else None
    state = "none" if tripped is None else "storm" if calm is None else \
        "cooling-down" if until and snapshot.now < until else "over"
    return {"state": state, "tripped_at": _iso(tripped), "calm_since": _iso(calm), "until": _iso(until),
            "cooldown_seconds": settings.storm_cooldown_seconds}


def held(snapshot: Snapshot, plan: Plan) -> list[dict[str, Any]]:
    """Our out-of-service taints and NetworkFences, each with what would lift it: the plan's own reasons."""
    verdicts = {v.node: v for v in plan.verdicts}
    kept, fences_held = dict(plan.taint_kept), {node: why for node, _, why in plan.fences_held}
    unfencing = {node for node, _ in plan.unfence}
    found = []
    for node in snapshot.nodes:
        if node.our_taint is None:
            continue
        verdict = verdicts.get(node.name)
        if node.name in plan.untaint:
            lift = "the next pass lifts it: the node is back, rebooted since we added it, and Ready long enough"
        elif node.name in kept:
            lift = f"stays until a human acts: {kept[node.name]}"
        elif verdict is not None and verdict.state is NodeState.RECOVERING:
            lift = f"lifted once the node has been back long enough: {verdict.reason}"
        else:
            lift = "held while the node is down; lifted once it is back, rebooted and Ready for RECOVERY_SECONDS"
        found.append({"kind": "out-of-service taint", "node": node.name, "lift": lift})
    for name, fence in sorted(snapshot.fences.items()):
        if not fence.ours or fence.state != "Fenced":
            continue
        lift = "the next pass lifts it: the node is back for good" if name in unfencing else \
            f"stays for a human: {fences_held[name]}" if name in fences_held else \
            "held while the node is down; lifted once the same machine is back for good"
        found.append({"kind": "NetworkFence", "node": name, "lift": lift})
    return found


def recoveries(plan: Plan, now: datetime) -> list[dict[str, Any]]:
    """Each claim whose pod we freed and whose replacement is not confirmed yet, with its age."""
    found = []
    for verdict in plan.recovery:
        if verdict.state != "waiting":
            continue
        try:
            record = Record.parse(verdict.entry.record)
        except BadObject:  # a record a pass would skip is not one pending
            continue
        found.append({"claim": record.claim, "pod": f"{record.namespace}/{record.pod}", "node": record.node,
                      "deleted_at": _iso(record.deleted_at),
                      "age_seconds": int((now - record.deleted_at).total_seconds()),
                      "times_out_at": _iso(verdict.times_out_at), "detail": verdict.detail})
    return found


def _iso(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment else ""
