"""The net under the code (`make lint`): ruff and mypy with this project's settings find the defects they are there
for, and a suppression of either says why on its own line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

BIN = Path(sys.executable).parent
SOURCES = ("rwo_failover", "rwo_testkit", "tests", "bench", "reconcile.py")
SUPPRESSION = re.compile(
    r"#\s*(noqa(?::\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)?|type:\s*ignore(?:\[[-a-z, ]+\])?)(.*)$")


def _python_files() -> list[Path]:
    return [p for name in SOURCES for p in ([ROOT / name] if name.endswith(".py") else (ROOT / name).rglob("*.py"))]


def test_every_suppression_names_its_rule_and_says_why():
    bare = []
    for path in _python_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found = SUPPRESSION.search(line)
            if found is None:
                continue
            rule, rest = found.group(1), found.group(2)
            named = ":" in rule or "[" in rule
            if not named or len(re.sub(r"^[\s#:-]*", "", rest)) < 8:
                bare.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[-100:]}")
    assert bare == [], "a suppression names its rule and its reason, on the same line"


def test_ruff_refuses_a_fourth_positional_parameter_and_a_complex_function(tmp_path):
    source = tmp_path / "sample.py"
    branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(11))
    source.write_text(f"def four(a, b, c, d):\n    return a\n\n\ndef branchy(x):\n{branches}\n    return -1\n")
    done = subprocess.run([BIN / "ruff", "check", "--config", ROOT / "pyproject.toml", "--output-format", "concise",
                           source], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "PLR0917" in done.stdout or "too-many-positional-arguments" in done.stdout, done.stdout
    assert "C901" in done.stdout or "complex-structure" in done.stdout, done.stdout


def test_mypy_is_strict_on_the_runtime_package(tmp_path):
    source = tmp_path / "sample.py"
    source.write_text("def untyped(x):\n    return x\n")
    done = subprocess.run([BIN / "mypy", "--config-file", ROOT / "pyproject.toml", source],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 1
    assert "no-untyped-def" in done.stdout, done.stdout
