"""`rwo-failover status` as one screen for people, or JSON for scripts: pure over what status.gather found.

Every string from the cluster (names, reasons, an operator's note, a BMC's or storage controller's message)
goes through plan_table.inert, so nothing read can forge a line or restyle the terminal.
"""

from __future__ import annotations

import json
from typing import Any

from ..planner import Plan
from . import plan_table
from .plan_table import inert


def plan_text(plan: Plan) -> str:
    """The dry-run plan table (plan_table.py): every node judged, its verdict in words, what a pass would do."""
    return plan_table.render(plan, dry_run=True)


def as_json(found: dict[str, Any]) -> str:
    """The same facts for scripts; the plan as a table is for people (its facts are in `nodes` and the rest)."""
    return json.dumps({k: v for k, v in found.items() if k != "plan_table"}, indent=2) + "\n"


def _age(seconds: int) -> str:
    minutes, second = divmod(max(seconds, 0), 60)
    hours, minute = divmod(minutes, 60)
    return f"{hours}h{minute:02d}m" if hours else f"{minute}m{second:02d}s"


def _pause_lines(pause: dict[str, Any], where: str) -> list[str]:
    """The switch, then each requester's pause: nothing is written while any stands."""
    lines = []
    if pause["switch"]:
        said = " ".join(p for p in (f"by {pause['by']}" if pause["by"] else "",
                                    f"since {pause['since']}" if pause["since"] else "",
                                    f"({pause['reason']})" if pause["reason"] else "") if p)
        lines.append(f"PAUSED {inert(said)}: no pass writes anything until data.paused is \"false\" in ConfigMap "
                     f"{where}")
    for request in pause["requests"]:
        said = " ".join(p for p in (f"since {request['since']}" if request["since"] else "",
                                    f"({request['reason']})" if request["reason"] else "") if p)
        lines.append(f"PAUSED by {inert(request['requester'])} {inert(said)}: until data.pause."
                     f"{inert(request['requester'])} is removed from ConfigMap {where}")
    return lines


def _controls(found: dict[str, Any]) -> list[str]:
    pause, storm = found["pause"], found["storm"]
    if pause["error"]:
        lines = [f"PAUSED (fail safe): the control ConfigMap cannot be read: {inert(pause['error'])}"]
    elif pause["paused"]:
        lines = _pause_lines(pause, f"{inert(found['namespace'])}/rwo-failover-control")
    else:
        lines = ["Not paused."]
    if storm["state"] == "storm":
        lines.append(f"STORM: a brake tripped at {storm['tripped_at']} and still trips; the cool-down "
                     f"({storm['cooldown_seconds']} s) starts at the first calm pass")
    elif storm["state"] == "cooling-down":
        lines.append(f"STORM COOL-DOWN until {storm['until']}: a brake tripped at {storm['tripped_at']}, calm since "
                     f"{storm['calm_since']}; every pass refuses until then")
    elif storm["state"] == "over":
        lines.append(f"Storm cool-down over since {storm['until']} (a brake tripped at {storm['tripped_at']}).")
    else:
        lines.append("No storm cool-down.")
    return lines


def _passes(passes: dict[str, Any]) -> list[str]:
    if passes.get("mode") == "cronjob":
        head = f"CronJob {inert(passes['cronjob'])}" + (" (SUSPENDED: no pass runs)" if passes.get("suspended") else "")
        lines = [f"{head}; last scheduled {passes.get('last_schedule') or 'never'}"]
        rows = [(j["job"], j["started"] or "-", j["outcome"] + (f" ({j['reason']})" if j["reason"] else ""),
                 ",".join(str(c) for c in j["exit_codes"]) or "-") for j in passes["jobs"]]
        if rows:
            lines += plan_table.table(("JOB", "STARTED", "OUTCOME", "EXIT CODE"), rows)
    elif passes.get("mode") == "ha":
        if passes.get("leader"):
            lines = [f"Leader: {inert(passes['leader'])} (Lease {inert(passes['lease'])}, renewed "
                     f"{passes.get('renewed') or '?'})"]
            if passes.get("readyz"):
                lines.append(f"Its /readyz: {inert(passes['readyz'].strip())}")
        else:
            lines = [f"No leader holds the Lease {inert(passes['lease'])}."]
    else:
        lines = []
    if passes.get("note"):
        lines.append(inert(passes["note"]))
    return lines


def as_text(found: dict[str, Any]) -> str:
    """One screen: controls, the plan (nodes and verdicts), what we hold, pending recoveries, the last passes."""
    install = found["install"]
    where = f"{install['kind']} {found['namespace']}/{install['name']}" if install["kind"] else \
        f"no install found: {inert(install['note'])}"
    lines = [f"rwo-failover status at {found['now']} (API server time): {where}",
             f"Judged with {inert(found['settings'])}, as a dry-run pass would; nothing was written.", ""]
    lines += ["CONTROLS", *_controls(found), ""]
    lines += ["NODES AND WHAT A PASS WOULD DO NOW", *found["plan_table"].rstrip("\n").splitlines()[2:], ""]
    lines.append(f"HELD BY US ({len(found['held'])})")
    if found["held"]:
        lines += plan_table.table(("KIND", "NODE", "WHAT WOULD LIFT IT"),
                                   [(h["kind"], h["node"], h["lift"]) for h in found["held"]])
    else:
        lines.append("No out-of-service taint or NetworkFence of ours.")
    lines += ["", f"RECOVERIES PENDING ({len(found['recoveries'])})"]
    if found["recoveries"]:
        lines += plan_table.table(("CLAIM", "POD", "NODE", "AGE", "WHY"), [
            (r["claim"], r["pod"], r["node"], _age(r["age_seconds"]), r["detail"] or f"until {r['times_out_at']}")
            for r in found["recoveries"]])
    else:
        lines.append("None: every pod we freed came back, or none was freed.")
    lines += ["", "LAST PASSES", *_passes(found["passes"])]
    if found["unreadable"]:
        lines += ["", f"UNREADABLE ({len(found['unreadable'])})", *(inert(u) for u in found["unreadable"])]
    return "\n".join(lines) + "\n"
