"""The plan as a table for people (rwo_failover/run/plan_table.py): on a terminal, or with OUTPUT=table."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys

import pytest
from conftest import ROOT, watched

from rwo_failover.planner import NodePlan, NodeState, NodeVerdict, Plan, PodAction, Refusal, RefusalKind, Skip
from rwo_failover.planner.types import AttachmentAction
from rwo_failover.run import plan_table
from rwo_failover.run.cli import main
from rwo_testkit import fake_cluster as fc

DOWN = NodeVerdict("worker-3", NodeState.DOWN, "node.cloudprovider.kubernetes.io/shutdown:NoSchedule",
                   "Ready=Unknown for 420s, Lease unrenewed for 415s")
POD = PodAction("shop", "postgres-0", "uid-1", "worker-3", "stuck: Terminating on node worker-3",
                ("shop/data-postgres-0",))
ATTACHMENT = AttachmentAction("csi-0a1b", "worker-3", "pv-data", "shop/data-postgres-0", ("shop/postgres-0",))


def test_the_table_shows_verdicts_releases_and_skips():
    plan = Plan((DOWN, NodeVerdict("worker-5", NodeState.NOT_YET, "", "Ready=False for 12s, below 60s")),
                (NodePlan(DOWN, (POD,), (ATTACHMENT,), add_taint=True),),
                (Skip("pod", "shop/uploader-0", "no exclusive volume (ReadWriteMany)"),), total_nodes=6, not_ready=2)

    text = plan_table.render(plan, dry_run=True)

    lines = text.splitlines()
    assert lines[0] == "PLAN (dry run: nothing will be changed)"
    assert lines[2].split() == ["NODE", "VERDICT", "WHY"]
    assert lines[3].split()[:2] == ["worker-3", "down"] and "Lease unrenewed for 415s" in lines[3]
    assert lines[4].split()[:2] == ["worker-5", "not-yet"]
    assert "WOULD RELEASE (1 pods, 1 VolumeAttachments)" in text
    pod_row = next(line for line in lines if "shop/postgres-0" in line and line.startswith("worker-3"))
    assert pod_row.split()[1] == "pod" and "frees shop/data-postgres-0" in pod_row
    att_row = next(line for line in lines if "csi-0a1b" in line)
    assert "PV pv-data of shop/data-postgres-0, once shop/postgres-0 is gone" in att_row
    assert any(line.split()[1:2] == ["taint"] for line in lines if line.startswith("worker-3"))
    assert "SKIPPED (1)" in text and "no exclusive volume (ReadWriteMany)" in text
    # columns line up: the WHY column starts at the same place in every row of the node table
    assert lines[3].index("Ready=") == lines[4].index("Ready=") == lines[2].index("WHY")


def test_a_refusal_says_nothing_is_touched():
    plan = Plan((DOWN,), (NodePlan(DOWN, (POD,)),), (), Refusal(RefusalKind.NODES_PER_PASS, "brake: 7 nodes"))
    text = plan_table.render(plan, dry_run=False)
    assert "REFUSED, nothing is touched: brake: 7 nodes" in text and "RELEASE" not in text


def test_nothing_tainted_is_one_line():
    assert "No node carries a shutdown taint (4 nodes, 0 not Ready): nothing to do." in \
        plan_table.render(Plan((), (), (), total_nodes=4), dry_run=True)


def test_on_a_terminal_a_one_shot_pass_prints_the_table_by_default(api, kubeconfig):
    """A real terminal (a pty): OUTPUT=auto shows the table; piped, the same command prints none."""
    fc.outage(api)
    command = [sys.executable, str(ROOT / "reconcile.py"), "--once", "--dry-run"]
    env = {"KUBECONFIG": kubeconfig, "PATH": "/usr/bin:/bin"}
    leader, follower = pty.openpty()
    proc = subprocess.Popen(command, stdout=follower, stderr=follower, env=env, cwd=ROOT)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=60)
    os.close(leader)
    shown = b"".join(chunks).decode()
    assert proc.returncode == 0 and "PLAN (dry run: nothing will be changed)" in shown, shown
    piped = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert piped.returncode == 0 and "PLAN" not in piped.stdout


# --- fencing, hostile strings, and where the table goes (issue 19 review) --------------------------------

def pass_with_table(api, tmp_path, **env) -> tuple[int, list[str], list[str], list]:
    """A real pass through main() with OUTPUT=table: its exit code, the table's lines (from stdout and
    stderr, wherever they went), the stdout lines, and the deletes it made."""
    out, err = io.StringIO(), io.StringIO()
    environ = {"KUBECONFIG": api.write_kubeconfig(str(tmp_path / "kc")), "LOG_FORMAT": "json", "OUTPUT": "table",
               "PASS_TIMEOUT_SECONDS": "20", **env}
    before = len(api.requests)
    code = main(["--once"], environ, stdout=out, stderr=err, sleep=lambda s: None, sightings=watched())
    table = [line for line in (out.getvalue() + err.getvalue()).splitlines() if not line.startswith("{")]
    deletes = [(r.resource, r.name) for r in api.requests[before:] if r.verb == "delete"]
    return code, table, out.getvalue().splitlines(), deletes


FENCED = {"FENCING": "networkfence", "NETWORK_FENCE_CLASS": "ceph-rbd-fence"}


def set_fence_result(api, result: str, message: str) -> None:
    from test_fencing import set_result
    set_result(api, result, message)


@pytest.mark.parametrize("dry_run", ["false", "true"])
@pytest.mark.parametrize("state, step, why", [
    ("no fence yet", "request", "no NetworkFence yet"),
    ("pending", "pending", "has not answered its current spec yet"),
    ("failed", "failed", "answered Failed: ceph: blocklist add refused"),
])
def test_a_node_whose_fencing_is_not_confirmed_shows_it_and_is_never_promised_a_release(
        api, tmp_path, state, step, why, dry_run):
    fc.outage(api)
    if state != "no fence yet":
        pass_with_table(api, tmp_path, **FENCED)  # creates our NetworkFence; it never answers here
    if state == "failed":
        set_fence_result(api, "Failed", "ceph: blocklist add refused")

    code, table, _, deletes = pass_with_table(api, tmp_path, DRY_RUN=dry_run, **FENCED)

    assert deletes == [], "fencing is not confirmed: the pass touches nothing on the node"
    promises = [line for line in table if line.startswith(("WILL RELEASE", "WOULD RELEASE"))]
    assert promises == [], table
    fence_row = next((line for line in table if line.split()[:3] == ["dead", "fence", "dead"]), "")
    assert step in fence_row and why in fence_row, table
    # its pod is still listed, under a heading that says it waits for fencing (or is kept)
    at = table.index(fence_row)
    header = max(i for i in range(at) if table[i].startswith("NODE  KIND"))
    assert "FENCING" in table[header - 1], table[header - 1]
    assert any("default/db-0" in line for line in table[header:]), "the pod it waits for is listed with it"


def test_a_node_confirmed_fenced_is_released_as_the_table_says(api, tmp_path):
    fc.outage(api)
    pass_with_table(api, tmp_path, **FENCED)
    set_fence_result(api, "Succeeded", "")
    code, table, _, deletes = pass_with_table(api, tmp_path, **FENCED)
    assert ("pods", "db-0") in deletes
    assert any(line.startswith("WILL RELEASE (1 pods, 1 VolumeAttachments)") for line in table), table


EVIL = ("rbd: error\r\n\nNo node carries a shutdown taint (4 nodes, 0 not Ready): nothing to do.\x1b[8m\u202e"
        + "x" * 300)


def test_strings_from_the_cluster_are_printed_inert():
    """Names, reasons and messages come from tenants, kubelets and storage controllers: a newline, a carriage
    return, an ANSI escape or a bidi override in them must not forge a line or restyle the terminal."""
    verdict = NodeVerdict("w\x1b[31m3", NodeState.DOWN, "t\x07", EVIL)
    pod = PodAction("shop", "pg\n0", "uid", "w3", EVIL, ("shop/d\r0",))
    plan = Plan((verdict,), (NodePlan(verdict, (pod,), fence="failed", fence_reason=EVIL),),
                (Skip("pod", "a\x1b]0;title\x07", EVIL),), total_nodes=5)
    for dry_run in (True, False):
        text = plan_table.render(plan, dry_run)
        assert not [ch for ch in text if not ch.isprintable() and ch != "\n"], repr(text)
        assert not any(line.startswith("No node carries") for line in text.splitlines())
        assert "\\x1b" in text and "\\n" in text, "shown escaped, so the operator sees something odd is there"
        assert max(len(line) for line in text.splitlines()) < 400, "a 10 kB message does not flood the table"


def test_a_fence_message_from_the_cluster_reaches_the_table_inert(api, tmp_path):
    fc.outage(api)
    pass_with_table(api, tmp_path, **FENCED)
    set_fence_result(api, "Failed", EVIL)
    _, table, _, _ = pass_with_table(api, tmp_path, DRY_RUN="true", **FENCED)
    assert not [line for line in table if "\x1b" in line or "\r" in line or "\u202e" in line], table
    assert not any(line.startswith("No node carries") for line in table)


def test_with_stdout_not_a_terminal_the_table_goes_to_stderr_and_stdout_stays_json(api, tmp_path):
    fc.outage(api)
    out, err = io.StringIO(), io.StringIO()
    code = main(["--once", "--dry-run"], {"KUBECONFIG": api.write_kubeconfig(str(tmp_path / "kc")),
                                          "LOG_FORMAT": "json", "OUTPUT": "table"},
                stdout=out, stderr=err, sightings=watched())
    assert code == 0
    json_lines = [json.loads(line) for line in out.getvalue().splitlines()]  # each whole: jq keeps working
    assert json_lines[-1]["message"] == "pass finished"
    assert "PLAN (dry run: nothing will be changed)" in err.getvalue() and "default/db-0" in err.getvalue()
