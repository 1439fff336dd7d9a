"""The README is the front door: its settings table, exit codes and commands must stay true."""

from __future__ import annotations

import re

from conftest import ROOT
from rwo_failover import config, exitcodes

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
