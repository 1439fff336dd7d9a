"""The README is the front door: its settings table, exit codes and commands must stay true."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import ROOT

from rwo_failover import settings as config
from rwo_failover.run import exitcodes

README = (ROOT / "README.md").read_text()
SETTINGS_DOC = (ROOT / "docs" / "settings.md").read_text()
RELIABILITY_DOC = (ROOT / "docs" / "reliability.md").read_text()


def test_settings_table_matches_the_code():
    table = SETTINGS_DOC.split("<!-- settings-table", 1)[1].split("<!-- /settings-table -->", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    documented = []
    for row in rows:
        name, flag, default, meaning = (cell.strip() for cell in row.strip("|").split("|"))
        documented.append((name.strip("`"), flag.strip("`"), "" if default == "(empty)" else default.strip("`"),
                           meaning))
    assert documented == [(s.name, s.flag, s.default, s.help) for s in config.SPECS]


LIVE_CODES = {v for k, v in vars(exitcodes).items() if k.startswith("EXIT_")}
OPERATIONS_DOC = (ROOT / "docs" / "operations.md").read_text()


def test_exit_codes_are_documented():
    documented = {int(m) for m in re.findall(r"^\| (\d+) \|", SETTINGS_DOC, re.M)}
    assert documented == LIVE_CODES
    assert not set(exitcodes.RETIRED) & LIVE_CODES, "a retired code is never reused"


def test_the_readme_s_one_line_exit_code_summary_names_every_code_and_no_retired_one():
    section = README.split("## Exit codes, in short", 1)[1].split("\n## ", 1)[0]
    assert {int(code) for code in re.findall(r"`(\d+)` ", section)} == LIVE_CODES
    assert "`0` done, nothing to do, or paused" in section, "a paused pass exits 0"


def exit_code_table() -> dict[int, tuple[str, str, str]]:
    table = OPERATIONS_DOC.split("<!-- exit-code-table -->", 1)[1].split("<!-- /exit-code-table -->", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()
            if re.match(r"^\| \d+ \|", line)]
    return {int(code): (meaning, job, alert) for code, meaning, job, alert in rows}


def pod_failure_policies() -> dict[str, dict]:
    """Each CronJob's Job spec as shipped: the kustomize base (cronjob.yaml links to it) and the chart's render."""
    import yaml

    from rwo_testkit import chart

    base = [d for d in yaml.safe_load_all((ROOT / "deploy/base/cronjob.yaml").read_text()) if d]
    rendered = chart.render({"mode": "cronjob"})
    return {source: next(d for d in docs if d["kind"] == "CronJob")["spec"]["jobTemplate"]["spec"]
            for source, docs in (("deploy/base/cronjob.yaml", base), ("the chart", rendered))}


def test_the_operations_exit_code_table_is_the_code_the_manifests_and_the_alerts():
    """docs/operations.md's table: every live code once; what the Job does is what exitcodes.FAIL_JOB and COUNT
    say and what each manifest's podFailurePolicy does; every alert it names exists in monitoring/rules.yml."""
    import yaml

    table = exit_code_table()
    assert set(table) == LIVE_CODES
    assert table[exitcodes.EXIT_OK][1] == "Succeeds" and "paused" in table[exitcodes.EXIT_OK][0]
    for code in exitcodes.FAIL_JOB:
        assert table[code][1].startswith("FailJob"), code
    for code in exitcodes.COUNT:
        assert table[code][1].startswith("Counted"), code
    assert set(exitcodes.FAIL_JOB) | set(exitcodes.COUNT) | {exitcodes.EXIT_OK} == LIVE_CODES
    rules = yaml.safe_load((ROOT / "monitoring" / "rules.yml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    for code, (_meaning, _job, alert) in table.items():
        named = set(re.findall(r"`(Rwo[A-Za-z]+)`", alert))
        assert named <= alerts, (code, named - alerts)
        assert named or code == exitcodes.EXIT_OK, f"exit {code}: which alert fires?"
    for source, job in pod_failure_policies().items():
        rules_by_action: dict[str, list] = {}
        for rule in job["podFailurePolicy"]["rules"]:
            rules_by_action.setdefault(rule["action"], []).append(rule)
        [fail], [count], [ignore] = rules_by_action["FailJob"], rules_by_action["Count"], rules_by_action["Ignore"]
        assert sorted(fail["onExitCodes"]["values"]) == sorted(exitcodes.FAIL_JOB), source
        assert sorted(count["onExitCodes"]["values"]) == sorted(exitcodes.COUNT), source
        assert fail["onExitCodes"]["operator"] == count["onExitCodes"]["operator"] == "In", source
        assert fail["onExitCodes"]["containerName"] == count["onExitCodes"]["containerName"] == "reconcile"
        assert ignore["onPodConditions"] == [{"type": "DisruptionTarget", "status": "True"}], source
        assert job["template"]["spec"]["restartPolicy"] == "Never", "podFailurePolicy needs it"
        assert job["backoffLimit"] == 1, "Counted: one retry, then fails"


def test_readme_commands_exist_in_the_makefile():
    targets = set(re.findall(r"^([a-z-]+):", (ROOT / "Makefile").read_text(), re.M))
    for command in re.findall(r"^make ([a-z-]+)", README, re.M) + re.findall(r"make ([a-z-]+)\s", README):
        assert command in targets, command
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_reliability_table_matches_the_fault_suite():
    from test_faults import RELIABILITY

    table = RELIABILITY_DOC.split("<!-- reliability-table -->", 1)[1].split("<!-- /reliability-table -->", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| Fault")]
    assert rows == [f"| {fault} | {behaviour} |" for fault, behaviour in RELIABILITY]


def test_readme_links_point_at_files_that_exist():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        assert (ROOT / target).exists(), target


def test_the_empty_value_sentence_is_true_for_every_setting():
    """Derived from config.SPECS, and each listed setting really accepts an empty value (and no other does)."""
    block = SETTINGS_DOC.split("<!-- empty-ok", 1)[1].split("<!-- /empty-ok -->", 1)[0]
    listed = re.findall(r"`([A-Z_]+)`", block)
    assert listed == [s.name for s in config.SPECS if s.empty_ok]
    for spec in config.SPECS:
        try:
            config.load([], {spec.name: ""})
            accepted = True
        except config.ConfigError:
            accepted = False
        assert accepted == (spec.name in listed), spec.name


def test_the_markdown_has_no_slips():
    """pymarkdownlnt over the README, the changelog and docs/ (line length is left to the writer)."""
    files = [str(ROOT / "README.md"), str(ROOT / "CHANGELOG.md"), *map(str, sorted((ROOT / "docs").glob("*.md")))]
    proc = subprocess.run([sys.executable, "-m", "pymarkdown", "--disable-rules", "md013", "scan", *files],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_no_list_is_broken_by_a_blank_line_between_its_items():
    """A blank line between two items of a bullet list splits it into two lists (or one loose list)."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
        assert not re.search(r"^- .*(\n  .*)*\n\n- ", text, re.M), path.name


def test_the_readme_says_first_who_adds_the_shutdown_taint_and_what_to_do_without_one():
    from rwo_failover.model import CLOUD_SHUTDOWN_KEY, OUT_OF_SERVICE_KEY

    assert "## Will it work on my cluster?" in README
    section = README.split("## Will it work on my cluster?", 1)[1].split("\n## ", 1)[0]
    assert README.index("## Will it work on my cluster?") < README.index("## Quick start"), "near the top"
    for needed in (CLOUD_SHUTDOWN_KEY, OUT_OF_SERVICE_KEY, "cloud controller manager", "bare metal",
                   "SHUTDOWN_TAINTS", "FENCING", "#how-fast-is-failover"):
        assert needed in section, needed
    # The failover time with default settings: the lead fills the span from bench/failover.py's defaults rows.
    assert re.search(r"default settings.*<!-- defaults-failover -->.+?<!-- /defaults-failover -->", section, re.S)


def test_the_readme_installs_the_released_chart_by_digest_in_three_lines():
    """Issue 38: install from the OCI chart the release workflow pushes, pinned by digest."""
    import yaml

    section = README.split("## Install\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)[1]
    assert len(block.strip().splitlines()) == 3
    release = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    charts = release["jobs"]["release"]["env"]["CHARTS"].replace("${{ github.repository_owner }}", "rwo-failover")
    assert f"helm install rwo-failover {charts}/rwo-failover@sha256:" in block


def test_operations_starts_from_status_and_the_readme_sends_bare_metal_to_its_page():
    """Issue 38: the operations guide's first section is `kubectl rwo-failover status`; "Will it work on my
    cluster?" links the bare-metal page, which exists and names both medik8s remediators."""
    first = re.search(r"^## (.+)$", OPERATIONS_DOC, re.M)[1]
    assert "kubectl rwo-failover status" in first
    section = README.split("## Will it work on my cluster?", 1)[1].split("\n## ", 1)[0]
    assert "(docs/bare-metal.md)" in section
    page = (ROOT / "docs" / "bare-metal.md").read_text()
    for needed in ("self-node-remediation", "fence-agents-remediation", "node-healthcheck", "OutOfServiceTaint",
                   "node.kubernetes.io/out-of-service"):
        assert needed in page, needed


# --- brakes, defaults and exit codes: as the code has them (issue 37) --------------------------------------
# README and docs/settings.md said the nodes-per-pass brake counts every node touched or proven down; the code
# counts only proven-down nodes with something to release that a tenant cannot fake (docs/safety.md had it right).

def _what_the_brakes_say() -> dict[str, str]:
    """Each brake's refusal, from the planner's own functions (duck-typed inputs: they read only these fields)."""
    from types import SimpleNamespace as Obj

    from rwo_failover.planner.nodes import nodes_brake, unhealthy_brake
    nodes = nodes_brake([Obj(counted=True)] * 3, Obj(max_nodes_per_pass=2))
    cluster = Obj(nodes=[Obj(name=n, ready=r) for n, r in (("a", "Unknown"), ("b", "Unknown"), ("c", "True"),
                                                            ("idle", "Unknown"))])
    unhealthy = unhealthy_brake(cluster, Obj(max_unhealthy_fraction=0.5), idle=frozenset({"idle"}))
    assert nodes is not None and unhealthy is not None
    return {"MAX_NODES_PER_PASS": nodes.message, "MAX_UNHEALTHY_FRACTION": unhealthy.message}


def _readme_bullet(name: str) -> str:
    section = README.split("## What it will not do", 1)[1].split("\n## ", 1)[0]
    [bullet] = [b for b in section.split("\n- ") if f"`{name}`" in b]
    return " ".join(bullet.split())


def test_each_brake_is_described_as_the_code_counts():
    """What a brake counts, in the words of its own refusal, is what its help (so docs/settings.md's table, the
    chart's schema) and the README's "What it will not do" say it counts."""
    said = _what_the_brakes_say()
    counted = re.fullmatch(r"brake: 3 (.+), more than MAX_NODES_PER_PASS=2", said["MAX_NODES_PER_PASS"])[1]
    assert counted == "proven-down nodes have something to release"
    left_out = re.search(r"\(1 (proven-down nodes with nothing to release) left out\)",
                         said["MAX_UNHEALTHY_FRACTION"])[1]
    assert "are not Ready" in said["MAX_UNHEALTHY_FRACTION"]
    helps = {spec.name: spec.help for spec in config.SPECS}
    for name, phrase in (("MAX_NODES_PER_PASS", counted), ("MAX_UNHEALTHY_FRACTION", left_out)):
        assert phrase in helps[name], (name, helps[name])
        assert phrase in _readme_bullet(name), (name, _readme_bullet(name))
    assert "not Ready" in helps["MAX_UNHEALTHY_FRACTION"] and "not Ready" in _readme_bullet("MAX_UNHEALTHY_FRACTION")
    assert "tenant cannot fake" in helps["MAX_NODES_PER_PASS"]
    assert "tenant cannot fake" in _readme_bullet("MAX_NODES_PER_PASS")


# Prose that states a setting's default: "waits 3 s more (`MIN_NOT_READY_SECONDS`", "`NAME=10` (defaults: a 40 s
# lease, and 3 s)" (the last figure is NAME's), "`NAME` (default `X`)".
_DEFAULT_CLAIMS = [
    re.compile(r"(?P<value>\d+(?:\.\d+)?) s more\s+\(`(?P<name>[A-Z][A-Z_]+)`"),
    re.compile(r"`(?P<name>[A-Z][A-Z_]+)=[^`]+`\s+\(defaults?: [^)]*?(?P<value>\d+(?:\.\d+)?) s\)"),
    re.compile(r"`(?P<name>[A-Z][A-Z_]+)`\s+\(default:?\s+`?(?P<value>[^`),;]+)`?[),;]"),
]


def test_defaults_stated_in_the_readme_and_the_settings_doc_are_the_code_s():
    defaults = {spec.name: spec.default for spec in config.SPECS}
    found = []
    for doc in (README, SETTINGS_DOC):
        for pattern in _DEFAULT_CLAIMS:
            for claim in pattern.finditer(doc):
                name, value = claim["name"], claim["value"].strip()
                assert name in defaults, f"{claim[0]!r} names no setting"
                assert value == defaults[name], f"{claim[0]!r}: the default of {name} is {defaults[name]!r}"
                found.append(name)
    assert found.count("MIN_NOT_READY_SECONDS") >= 2, found  # the README's two statements of it: still read


def _meaning_words(text: str) -> set[str]:
    ignored = {"a", "an", "the", "or", "and", "of", "to", "is", "was", "nothing", "some", "call", "by", "in", "it"}
    return {w[:5] for w in re.findall(r"[a-z]+", text.lower()) if w not in ignored and len(w) > 2}  # crude stems


def test_each_exit_code_means_in_the_docs_what_it_means_in_the_code():
    """The README's codes in short, and docs/settings.md's table, against exitcodes.py: the same codes, and each
    meaning shares its key words with the code's own comment on that constant (3 is refused, 4 unreadable...)."""
    source = (ROOT / "rwo_failover" / "run" / "exitcodes.py").read_text()
    said = {int(value): comment for value, comment in re.findall(r"^EXIT_\w+ = (\d+)\s+# (.+)$", source, re.M)}
    assert set(said) == {v for k, v in vars(exitcodes).items() if k.startswith("EXIT_")}
    short = README.split("## Exit codes, in short", 1)[1].split("\n## ", 1)[0]
    readme = {int(code): text for code, text in re.findall(r"`(\d+)` ([^·`]+)", short)}
    table = {int(code): text for code, text in re.findall(r"^\| (\d+) \| ([^|]+) \|", SETTINGS_DOC, re.M)}
    assert set(readme) == set(said) == set(table)
    for code, comment in said.items():
        assert _meaning_words(readme[code]) & _meaning_words(comment), (code, readme[code], comment)
        assert _meaning_words(table[code]) & _meaning_words(comment), (code, table[code], comment)
