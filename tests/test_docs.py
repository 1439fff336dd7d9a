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


def test_exit_codes_are_documented():
    codes = {v: k for k, v in vars(exitcodes).items() if k.startswith("EXIT_")}
    documented = {int(m) for m in re.findall(r"^\| (\d+) \|", SETTINGS_DOC, re.M)}
    assert documented == set(codes)


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
