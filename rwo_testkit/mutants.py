"""Mutation testing of the modules where the safety rules live, with mutmut 3 (`make mutants`; docs/testing.md).

    python -m rwo_testkit.mutants                      # every group below
    python -m rwo_testkit.mutants model.fields kube.clock
    python -m rwo_testkit.mutants --changed main       # the groups whose module changed (see changed_base)

Each group is one module and a fast, relevant selection of tests: mutmut runs the selection once to learn which
test covers which function, then each mutant (one small change to one function) in a forked process with only the
tests that cover that function, fastest first, and stops at the first failure. A mutant no test kills is a
survivor: kill it with a test, or write in docs/testing.md why it is equivalent. Each group runs in its own copy of
the tree under build/mutants/<group> (mutmut reads its settings from that copy's pyproject.toml), so groups can
have different selections. Prints, per group and in all: mutants, killed, survived, timed out, no tests, wall time;
exits 1 when any mutant survived that docs/testing.md does not list as equivalent.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "mutants"
DOC = ROOT / "docs" / "testing.md"


@dataclass(frozen=True)
class Group:
    module: str               # a file under rwo_failover/
    tests: tuple[str, ...]    # pytest arguments: the selection mutmut runs for this module
    lead: bool = False        # changed in parallel by issues 35 and 36: figures to be measured again after the merge


def _g(module: str, *tests: str, lead: bool = False) -> Group:
    return Group(module, tests, lead)


PASSES = ("tests/test_judgment.py", "tests/test_safety.py", "tests/test_scenarios.py")
GROUPS = {
    "planner.nodes": _g("rwo_failover/planner/nodes.py", "tests/test_brake_edges.py", "tests/test_node_opt_out.py",
                        "tests/test_redfish_planner.py", *PASSES),
    "planner.evidence": _g("rwo_failover/planner/evidence.py", "tests/test_brake_edges.py",
                           "tests/test_attacher_finalizer.py", "tests/test_tenant_data.py", "tests/test_liveness.py",
                           *PASSES),
    "planner.pods": _g("rwo_failover/planner/pods.py", "tests/test_opt_out_values.py", "tests/test_live_reads.py",
                       *PASSES),
    "planner.attachments": _g("rwo_failover/planner/attachments.py", "tests/test_orphans.py",
                              "tests/test_attacher_finalizer.py",
                              "tests/test_attachment_precondition.py", *PASSES),
    "planner.caps": _g("rwo_failover/planner/caps.py", "tests/test_caps.py", "tests/test_safety.py",
                       "tests/test_scenarios.py"),
    "planner.control": _g("rwo_failover/planner/control.py", "tests/test_pause.py", "tests/test_storm_cooldown.py",
                          "tests/test_storm_memory_attack.py"),
    "model.fields": _g("rwo_failover/model/fields.py", "tests/test_fields_edges.py", "tests/test_decode.py",
                       "tests/test_opt_out_values.py",
                       "tests/test_server_clock.py", "tests/test_hostile_input.py", "tests/test_safety.py",
                       "tests/test_judgment.py"),
    "model.matchers": _g("rwo_failover/model/matchers.py", "tests/test_config.py", "tests/test_decode.py",
                         "tests/test_safety.py"),
    "kube.clock": _g("rwo_failover/kube/clock.py", "tests/test_server_clock.py", "tests/test_liveness.py"),
    "act.recheck": _g("rwo_failover/act/recheck.py", "tests/test_live_reads.py", "tests/test_node_opt_out.py",
                      "tests/test_liveness.py", "tests/test_judgment.py"),
    "act.writer": _g("rwo_failover/act/writer.py", "tests/test_write_guard.py", "tests/test_faults.py",
                     "tests/test_attachment_precondition.py", "tests/test_deadlines.py"),
    # Changed in parallel by the lead (issues 35 and 36): covered, to be measured again after the merge.
    "planner.taint": _g("rwo_failover/planner/taint.py", "tests/test_out_of_service.py",
                        "tests/test_taint_identity.py", lead=True),
    "planner.fencing": _g("rwo_failover/planner/fencing.py", "tests/test_fencing.py",
                          "tests/test_fence_identity.py", lead=True),
    "planner.liveness": _g("rwo_failover/planner/liveness.py", "tests/test_liveness.py", "tests/test_judgment.py",
                           lead=True),
    "planner.redfish": _g("rwo_failover/planner/redfish.py", "tests/test_redfish_planner.py", lead=True),
    "model.node": _g("rwo_failover/model/node.py", "tests/test_decode.py", "tests/test_node_opt_out.py",
                     "tests/test_taint_identity.py", lead=True),
    "model.fence": _g("rwo_failover/model/fence.py", "tests/test_decode.py", "tests/test_fencing.py", lead=True),
    "act.node_taint": _g("rwo_failover/act/node_taint.py", "tests/test_out_of_service.py",
                         "tests/test_taint_identity.py", lead=True),
}
COPIED = ("rwo_failover", "rwo_testkit", "tests", "reconcile.py", "docs", "README.md", "Makefile", "rbac.yaml")
COUNTS = ("killed", "survived", "timeout", "no_tests", "suspicious", "skipped", "segfault")


def _pyproject(group: Group) -> str:
    """The tree's pyproject.toml with a [tool.mutmut] for this group (mutmut reads nothing else)."""
    text = (ROOT / "pyproject.toml").read_text()
    settings = {"source_paths": ["rwo_failover"], "only_mutate": [group.module],
                "pytest_add_cli_args": ["-p", "no:cacheprovider", "-q", "-p", "no:randomly"],
                "pytest_add_cli_args_test_selection": list(group.tests), "debug": False,
                # mutmut runs the tests in its own copy (mutants/): what they start or read by path goes too
                "also_copy": [item for item in COPIED if item not in ("rwo_failover", "tests")]}
    lines = ["", "[tool.mutmut]"] + [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    return text + "\n".join(lines) + "\n"


def prepare(name: str, group: Group) -> Path:
    work = BUILD / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for item in COPIED:
        source = ROOT / item
        if source.is_dir():
            shutil.copytree(source, work / item, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif source.exists():
            shutil.copy2(source, work / item)
    (work / "pyproject.toml").write_text(_pyproject(group))
    return work


def run_group(name: str, group: Group) -> dict:
    work = prepare(name, group)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "mutmut", "run"], cwd=work, capture_output=True, text=True)
    seconds = time.monotonic() - started
    (work / "mutmut-run.log").write_text(proc.stdout + proc.stderr)
    subprocess.run([sys.executable, "-m", "mutmut", "export-cicd-stats"], cwd=work, capture_output=True, text=True)
    stats_file = work / "mutants" / "mutmut-cicd-stats.json"
    stats = json.loads(stats_file.read_text()) if stats_file.exists() else {}
    listed = subprocess.run([sys.executable, "-m", "mutmut", "results"], cwd=work, capture_output=True,
                            text=True).stdout
    survivors = sorted(m for m, status in re.findall(r"^\s+(\S+): (\w[\w ]*)$", listed, re.M)
                       if status.strip() == "survived")
    return {"group": name, "module": group.module, "seconds": round(seconds), "returncode": proc.returncode,
            "survivors": survivors, **{key: int(stats.get(key, 0)) for key in COUNTS},
            "mutants": int(stats.get("total", 0))}


BACKLOG = ROOT / "tests" / "mutants_not_yet_judged.txt"


def explained() -> set[str]:
    """Survivors docs/testing.md lists (equivalent, or open with the reason), and the backlog: survivors of the
    first measurement (issue 37) not judged yet, one a line. A survivor in neither fails the run: a new one, or one
    whose function changed (mutmut numbers the mutants of a function afresh)."""
    known = set(re.findall(r"`(rwo_failover\.[\w.]+__mutmut_\d+)`", DOC.read_text())) if DOC.exists() else set()
    if BACKLOG.exists():
        known |= {line.split()[0] for line in BACKLOG.read_text().splitlines() if line.strip()
                  and not line.startswith("#")}
    return known


def _git(*args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def changed_base(ref: str) -> str:
    """What a change is measured against: the merge base with `ref` (a branch: what it adds to main); on `ref`
    itself (CI runs on the submitted main), the first parent of HEAD (a merge: the whole branch it brings; a
    direct commit: that commit). "" when there is neither (a clone of one commit)."""
    head = _git("rev-parse", "HEAD")
    merge = _git("merge-base", "HEAD", ref)
    if merge and merge != head:
        return merge
    return _git("rev-parse", "-q", "--verify", "HEAD^1")


def changed_groups(ref: str) -> list[str]:
    """The groups whose module differs from changed_base(ref); every group when there is no base to compare with:
    a checkout that cannot say what changed is measured whole rather than not at all."""
    base = changed_base(ref)
    if not base:
        print(f"mutants: nothing to compare HEAD with ({ref} or a parent): every group runs", flush=True)
        return list(GROUPS)
    changed = set(_git("diff", "--name-only", base, "HEAD", "--").split())
    changed |= set(_git("diff", "--name-only", "HEAD", "--").split())  # and what is not committed yet
    print(f"mutants: against {base[:12]}, {len(changed)} files changed", flush=True)
    return [name for name, group in GROUPS.items() if group.module in changed]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m rwo_testkit.mutants")
    parser.add_argument("groups", nargs="*", help=f"groups to run (default: all): {', '.join(GROUPS)}")
    parser.add_argument("--record-backlog", action="store_true",
                        help="append the survivors no doc or backlog explains to tests/mutants_not_yet_judged.txt")
    parser.add_argument("--changed", metavar="REF", help="only the groups whose module changed: since the merge "
                                                         "base with REF, or on REF itself since HEAD's first parent")
    args = parser.parse_args(argv)
    unknown = [g for g in args.groups if g not in GROUPS]
    if unknown:
        parser.error(f"unknown group(s) {', '.join(unknown)}; known: {', '.join(GROUPS)}")
    names = args.groups or (changed_groups(args.changed) if args.changed else list(GROUPS))
    if not names:
        print("mutants: no module under mutation testing changed")
        return 0
    results, began, known = [], time.monotonic(), explained()
    print(f"{'group':22} {'mutants':>7} {'killed':>6} {'survived':>8} {'timeout':>7} {'no tests':>8} {'seconds':>7}")
    for name in names:
        found = run_group(name, GROUPS[name])
        results.append(found)
        print(f"{name:22} {found['mutants']:7d} {found['killed']:6d} {found['survived']:8d} {found['timeout']:7d} "
              f"{found['no_tests']:8d} {found['seconds']:7d}" + ("  (lead's: re-measure after merge)"
                                                                  if GROUPS[name].lead else ""), flush=True)
    total = {key: sum(r[key] for r in results) for key in ("mutants", "killed", "survived", "timeout", "no_tests")}
    print(f"{'all':22} {total['mutants']:7d} {total['killed']:6d} {total['survived']:8d} {total['timeout']:7d} "
          f"{total['no_tests']:8d} {round(time.monotonic() - began):7d}")
    unexplained = [(r["group"], m) for r in results for m in r["survivors"] if m not in known]
    broken = [r["group"] for r in results if r["returncode"] != 0 or r["mutants"] == 0]
    for group in broken:
        print(f"mutants: {group} did not run (see build/mutants/{group}/mutmut-run.log)")
    if unexplained:
        print(f"mutants: {len(unexplained)} survivors neither killed nor listed in docs/testing.md:")
        for group, mutant in unexplained:
            later = "  (lead's module: judge after the merge)" if GROUPS[group].lead else ""
            print(f"  {mutant}   (cd build/mutants/{group} && python -m mutmut show {mutant}){later}")
    if args.record_backlog and unexplained:
        with BACKLOG.open("a", encoding="utf-8") as backlog:
            backlog.writelines(f"{mutant}  {group}\n" for group, mutant in unexplained)
        print(f"mutants: {len(unexplained)} recorded in {BACKLOG.relative_to(ROOT)}")
        return 1 if broken else 0
    # The lead's modules (issues 35 and 36) change in parallel: their survivors are reported, not yet failed on.
    failing = [m for group, m in unexplained if not GROUPS[group].lead]
    return 1 if failing or broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
