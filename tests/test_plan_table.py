"""The plan as a table for people (rwo_failover/plan_table.py): on a terminal, or with OUTPUT=table."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys

from conftest import ROOT
from rwo_failover import plan_table
from rwo_failover.cli import main
from rwo_failover.planner import NodePlan, NodeState, NodeVerdict, Plan, PodAction, Refusal, RefusalKind, Skip
from rwo_failover.planner.types import AttachmentAction
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


def test_output_table_prints_it_before_acting_and_json_logs_stay(api, kubeconfig):
    fc.outage(api)
    out, err = io.StringIO(), io.StringIO()
    code = main(["--once", "--dry-run", "--output", "table"], {"KUBECONFIG": kubeconfig, "LOG_FORMAT": "json"},
                out, err)
    assert code == 0, err.getvalue()
    text = out.getvalue()
    assert "PLAN (dry run: nothing will be changed)" in text and "default/db-0" in text
    json_lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert json_lines[-1]["message"] == "pass finished"


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
