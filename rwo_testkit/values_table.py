"""The values table of the chart's README, made from values.yaml and its comments, as helm-docs makes one.

Each key that holds a value (a scalar, a list, or a map written inline or left empty) is a row: its dotted path,
its type, its default (as JSON) and its description, which is the comment block right above it. A key whose
value is a map of further keys is no row itself; its children are. The README holds the table between
`<!-- values-table -->` and `<!-- /values-table -->`; tests/test_chart_readme.py checks that it is the one this
makes. `python -m rwo_testkit.values_table` writes it there.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parent.parent / "charts" / "rwo-failover"
README = CHART / "README.md"
START, END = "<!-- values-table -->", "<!-- /values-table -->"
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z][A-Za-z0-9_.-]*):(?P<rest>.*)$")


def _described_keys(text: str) -> list[tuple[str, str]]:
    """Every key of the YAML text, by dotted path, in file order, with the comment block right above it."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[int, str]] = []  # (indent, key) of the enclosing maps
    comment: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comment.append(stripped[1:].strip())
            continue
        match = _KEY.match(line)
        if not match:  # a blank line, a list item, "---": it ends a comment block
            comment = []
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([key for _, key in stack] + [match["key"]])
        found.append((path, " ".join(line for line in comment if line)))
        comment = []
        stack.append((indent, match["key"]))
    return found


def _at(values: Any, path: str) -> Any:
    for key in path.split("."):
        values = values[key]
    return values


def _type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    return "list" if isinstance(value, list) else "object"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def rows(text: str) -> list[tuple[str, str, str, str]]:
    """(key, type, default, description) for each key of values.yaml that holds a value."""
    values = yaml.safe_load(text)
    found: list[tuple[str, str, str, str]] = []
    whole: list[str] = []  # the keys taken as one value: their own keys are no rows
    for path, description in _described_keys(text):
        if any(path.startswith(parent + ".") for parent in whole):
            continue
        value = _at(values, path)
        if isinstance(value, dict) and value and not _is_one_value(path, value):
            continue  # a map of further keys: its children are the rows
        whole.append(path)
        found.append((path, _type(value), json.dumps(value, separators=(",", ":")), description))
    return found


def _is_one_value(path: str, value: dict) -> bool:
    """A map that is one value, not a group of documented keys: a Secret reference, the Kubernetes object a key
    takes whole (resources), or a map of settings by name (the escape hatch)."""
    return set(value) == {"secretName", "key"} or path == "resources" or path.split(".")[-1] == "settings"


def table(text: str) -> str:
    lines = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    lines += [f"| `{key}` | {kind} | `{_cell(default)}` | {_cell(description)} |"
              for key, kind, default, description in rows(text)]
    return "\n".join(lines) + "\n"


def rendered_readme(readme: str, values_text: str) -> str:
    """The README with its values table made afresh from values.yaml."""
    before, rest = readme.split(START, 1)
    _, after = rest.split(END, 1)
    return f"{before}{START}\n{table(values_text)}{END}{after}"


def main(argv: list[str]) -> int:
    """Write the table into the chart's README (`--check`: exit 1, writing nothing, if it is not current)."""
    current = README.read_text()
    fresh = rendered_readme(current, (CHART / "values.yaml").read_text())
    if argv == ["--check"]:
        if fresh != current:
            print(f"{README} is not current: run python -m rwo_testkit.values_table", file=sys.stderr)
            return 1
        return 0
    README.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
