"""The tree shows the pipeline, and the layer contracts hold it there (docs/architecture.md).

- docs/architecture.md lists exactly the packages and modules of rwo_failover/;
- every package says in its docstring what it may use;
- no runtime module is over MAX_LINES;
- a wrong import, planted in a copy of the package, fails `lint-imports`: the contracts are not vacuous.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "rwo_failover"
DOC = ROOT / "docs" / "architecture.md"
MAX_LINES = 300
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def documented_tree() -> set[str]:
    """Every path the tree block of docs/architecture.md names, relative to the repository."""
    text = DOC.read_text()
    block = text.split("<!-- architecture-tree")[1].split("<!-- /architecture-tree -->")[0]
    paths, stack = set(), []
    for line in block.splitlines():
        found = re.match(r"^( *)([\w.]+/?)(\s|$)", line)
        if not found or line.startswith("```"):
            continue
        depth, name = len(found[1]) // 2, found[2]
        stack[depth:] = [name.rstrip("/")]
        paths.add("/".join(stack) + ("/" if name.endswith("/") else ""))
    return paths


def actual_tree() -> set[str]:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if not (path.name == "__init__.py" and path.parent != PACKAGE):  # a sub-package's is its "name/" entry
            found.add(rel.as_posix())
        found |= {parent.as_posix() + "/" for parent in rel.parents if parent != Path(".")}
    return found


def test_the_architecture_page_lists_exactly_the_tree() -> None:
    documented, actual = documented_tree(), actual_tree()
    assert "rwo_failover/planner/liveness.py" in documented  # the parser reads nested entries
    assert documented - actual == set(), "docs/architecture.md names what does not exist"
    assert actual - documented == set(), "docs/architecture.md leaves these out"


def test_every_package_says_what_it_may_use() -> None:
    packages = sorted(p for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE)
    assert len(packages) >= 7
    for init in packages:
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "May use:" in doc, f"{init.relative_to(ROOT)}'s docstring does not say what the layer may use"


def test_no_runtime_module_is_over_the_limit() -> None:
    sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    assert sizes, "no module found"
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_the_contracts_pass_on_the_tree() -> None:
    done = subprocess.run([str(LINT_IMPORTS)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


# (module that gets the import, the import line, the contract that must break)
WRONG_IMPORTS = [
    ("planner/types.py", "from ..kube import Api", "The planner is pure"),
    ("planner/nodes.py", "import time", "The planner is pure"),
    ("model/node.py", "from ..settings import Settings", "The pipeline's layers"),
    ("observe/lookups.py", "from ..act.writer import Writer", "The pipeline's layers"),
    ("kube/api.py", "from ..planner import plan", "The pipeline's layers"),
    ("act/recovery.py", "from ..run.metrics import Metrics", "The pipeline's layers"),
    ("act/writer.py", "from .actor import Actor", "Act: the order of operations"),
    ("kube/transport.py", "from .cache import WatchedCluster", "API access: the watch cache"),
    ("model/pod.py", "from .node import Node", "The object model: one module per Kubernetes kind"),
    ("settings/values.py", "import urllib3", "The object model and the settings do no I/O"),
]


@pytest.mark.parametrize("module, line, contract", WRONG_IMPORTS, ids=[w[0] + ": " + w[1] for w in WRONG_IMPORTS])
def test_a_wrong_import_fails_the_contracts(tmp_path: Path, module: str, line: str, contract: str) -> None:
    """A copy of the package with one import against the layers: lint-imports, as `make test` runs it, fails and
    names the contract."""
    shutil.copytree(PACKAGE, tmp_path / "rwo_failover", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "rwo_testkit", tmp_path / "rwo_testkit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "rwo_failover" / module
    source = target.read_text()
    anchor = "from __future__ import annotations\n"
    assert anchor in source
    target.write_text(source.replace(anchor, f"{anchor}{line}  # planted by the test\n", 1))
    env = dict(os.environ, PYTHONPATH=str(tmp_path))  # the copy shadows the editable install
    done = subprocess.run([str(LINT_IMPORTS)], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode != 0, f"lint-imports passed with {line!r} in {module}:\n{done.stdout}"
    broken = done.stdout.split("Broken contracts")[-1]
    assert contract in broken, done.stdout
