"""What the comments, docstrings and docs name exists (issue 42).

The tree is read with `ast` and the file system, nothing is imported. A reference of a clear shape, in a comment or
docstring of rwo_failover/, rwo_testkit/, tests/ or bench/, or in README.md or docs/*.md, must resolve:

- a path: a word ending in `.py` (with an optional `::name` it must define), anything under a top-level folder
  (`docs/safety.md`, `deploy/ha`), or in backticks a path under a runtime package (`kube/`, `run/loop.py`); a short
  form resolves by its trailing components (`kube/api.py`, `writer.py`);
- a test's name, `test_...`: a function or a module of the tree;
- a dotted name starting with a runtime package (`rwo_failover.kube.api`, `kube.api.Api.call`, `planner.plan`);
- in backticks: a class's member (`Api.call`), a name in a module of the tree (`writer.Writer`), and a call
  (`now()`, `api.lag_watch_cache()`): the name called is defined in the tree, or is a builtin;
- in backticks or plain, `settings.FENCING`, the chart's `settings` map: the key is a setting.

mutmut's names for mutants (docs/testing.md) resolve to the function or method mutated.

Kubernetes and chart field paths (`spec.nodeName`, `status.result`, `fencing.mode`) are not Python names and are
left alone. The second test plants made-up references and checks that each one is reported.
"""

from __future__ import annotations

import ast
import builtins
import io
import re
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE_DIRS = ("rwo_failover", "rwo_testkit", "tests", "bench")
TOP_FOLDERS = ("bench", "charts", "deploy", "docs", "monitoring", "rwo_failover", "rwo_testkit", "tests")
SUBPACKAGES = ("kube", "planner", "act", "observe", "run", "settings", "model")
PREFIXES = ("rwo_failover", "rwo_testkit", *SUBPACKAGES)
SKIPPED_DIRS = {"__pycache__", ".venv", ".git", "build", "mutants", ".ci-venvs", ".wheelhouse"}
# A Kubernetes object's field path (`status.result`, `metadata.uid`), not a Python name.
K8S_FIELD_ROOTS = {"metadata", "spec", "status", "data"}

# Names of a clear shape that exist outside this tree. Keep it short; each says where the name lives.
EXCEPTIONS = {
    "ComputerSystem.Reset": "the Redfish action the BMC exposes (DMTF Redfish schema), not a Python name",
    "rate()": "a PromQL function (monitoring/rules.yml)",
    "histogram_quantile()": "a PromQL function (monitoring/rules.yml)",
    "deploy/rwo-failover": "kubectl's TYPE/NAME for the HA Deployment (`kubectl logs deploy/rwo-failover`), not a path",
}
EXCUSED: set[str] = set()  # the exceptions a scan met: one no text needs any more is dropped from EXCEPTIONS

PY_PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w-]+\.py)(?:::(\w+))?(?![\w/-])")
TOP_PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(TOP_FOLDERS) + r")/[\w./*-]*)")
TEST_NAME = re.compile(r"(?<![\w./:-])(test_\w+)(?!\.?[\w*/-])")
DOTTED = re.compile(r"(?<![\w./-])((?:" + "|".join(PREFIXES) + r")(?:\.\w+)+)(?![\w/-])")
CODE_SPAN = re.compile(r"`([^`]+)`")
CHAIN = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(\(.*\))?$", re.S)
CAMEL_FIELD = re.compile(r"^[a-z][a-z0-9]*[A-Z]")  # `nodeName`, `startTime`: a Kubernetes or chart field
SPAN_PATH = re.compile(r"^(?:" + "|".join(SUBPACKAGES) + r")(?:/[\w.*-]+)*/?$")
FILE_SUFFIXES = {"py", "md", "yaml", "yml", "json", "txt", "toml", "in", "cfg", "pth"}
MUTANT_FUNCTION = re.compile(r"^x_(\w+?)__mutmut_\d+$")
MUTANT_METHOD = re.compile(r"^x\u01c1(\w+?)\u01c1(\w+?)__mutmut_\d+$")


@dataclass
class Index:
    """What exists: modules by every name they go by, their top-level names, classes and their members, files."""

    modules: dict[str, list[Path]] = field(default_factory=dict)
    namespaces: dict[Path, set[str]] = field(default_factory=dict)
    members: dict[str, set[str]] = field(default_factory=dict)
    bases: dict[str, set[str]] = field(default_factory=dict)
    defined: set[str] = field(default_factory=set)
    files: set[str] = field(default_factory=set)
    settings: set[str] = field(default_factory=set)
    trees: dict[Path, ast.Module] = field(default_factory=dict)

    def class_members(self, name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        found = set(self.members.get(name, ()))
        for base in self.bases.get(name, set()) - seen:
            found |= self.class_members(base, seen | {name})
        return found


def module_names(rel: Path) -> list[str]:
    """`rwo_failover/kube/api.py` goes by `rwo_failover.kube.api`, `kube.api` and `api`."""
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if parts[0] in ("tests", "bench"):
        parts.pop(0)
    return [".".join(parts[i:]) for i in range(len(parts)) if parts[i:]]


def bound_names(body: Iterable[ast.stmt]) -> Iterator[str]:
    """The names a module's top level binds: defs, classes, assignments, imports (also under `if` and `try`)."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            yield from (n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            yield from ((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.If | ast.Try):
            for block in (node.body, node.orelse, getattr(node, "finalbody", []), *[
                    h.body for h in getattr(node, "handlers", [])]):
                yield from bound_names(block)


def statements(body: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """Each statement, nested ones included (in defs, classes, blocks, handlers, cases); no expression is walked."""
    for node in body:
        yield node
        for block in ("body", "orelse", "finalbody", "handlers", "cases"):
            yield from statements(getattr(node, block, []))


def self_attributes(cls: ast.ClassDef) -> Iterator[str]:
    """`self.name = ...` (or `cls.name`) anywhere in the class's methods."""
    for node in statements(cls.body):
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for target in targets:
            for found in ast.walk(target) if isinstance(target, ast.AST) else ():
                if isinstance(found, ast.Attribute) and isinstance(found.value, ast.Name) \
                        and found.value.id in ("self", "cls"):
                    yield found.attr


def index_classes(index: Index, tree: ast.Module) -> None:
    for node in statements(tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            index.defined.add(node.name)
        if not isinstance(node, ast.ClassDef):
            continue
        names = set(bound_names(node.body)) | set(self_attributes(node))
        index.members.setdefault(node.name, set()).update(names)
        index.bases.setdefault(node.name, set()).update(b.id for b in node.bases if isinstance(b, ast.Name))
        index.defined |= names | {node.name}


def walk_files(top: Path) -> Iterator[Path]:
    for path in sorted(top.iterdir()):
        if path.name in SKIPPED_DIRS or path.name.endswith(".egg-info"):
            continue
        yield path
        if path.is_dir():
            yield from walk_files(path)


def python_files() -> list[Path]:
    return sorted(p for d in CODE_DIRS for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts)


def setting_names(tree: ast.Module) -> set[str]:
    """The name of each row of the settings table, `Spec("FENCING", ...)`."""
    return {node.args[0].value for node in ast.walk(tree) if isinstance(node, ast.Call) and node.args
            and isinstance(node.func, ast.Name) and node.func.id == "Spec" and isinstance(node.args[0], ast.Constant)}


def build_index() -> Index:
    index = Index()
    index.files = {p.relative_to(ROOT).as_posix() for p in walk_files(ROOT)}
    for path in python_files():
        tree = ast.parse(path.read_text(), str(path))
        index.trees[path] = tree
        for name in module_names(path.relative_to(ROOT)):
            index.modules.setdefault(name, []).append(path)
        index.namespaces[path] = set(bound_names(tree.body))
        index.defined |= index.namespaces[path]
        index_classes(index, tree)
        if path.parent == ROOT / "rwo_failover" / "settings":
            index.settings |= setting_names(tree)
    return index


def unmutate(parts: list[str]) -> list[str]:
    """mutmut's names for a mutant: `x_parse_time__mutmut_23` is `parse_time`,
    `xǁSharedServerClockǁobserve__mutmut_3` is `SharedServerClock.observe`."""
    out: list[str] = []
    for part in parts:
        method, function = MUTANT_METHOD.match(part), MUTANT_FUNCTION.match(part)
        out.extend(method.groups() if method else [function[1]] if function else [part])
    return out


def member_chain(index: Index, parts: list[str]) -> bool:
    """`Api.call`, `FakeApiServer.attacher.detach`: each name is a member of the one before when that is a class we
    know, else (an instance's attribute) a name defined somewhere in the tree."""
    for owner, name in zip(parts, parts[1:], strict=False):
        known = index.class_members(owner) if owner in index.members else index.defined
        if name not in known:
            return False
    return True


def resolves_dotted(index: Index, dotted: str) -> bool:
    """The longest leading part that is a module; the next name is bound in it, the rest are its members."""
    parts = unmutate(dotted.split("."))
    for cut in range(len(parts), 0, -1):
        for path in index.modules.get(".".join(parts[:cut]), []):
            rest = parts[cut:]
            if not rest or (rest[0] in index.namespaces[path] and member_chain(index, rest)):
                return True
    return False


def resolves_path(index: Index, ref: str) -> bool:
    ref = ref.rstrip(".")
    if "*" in ref:
        return any(ROOT.glob(ref.rstrip("/")))
    ref = ref.rstrip("/")
    if ref.split("/")[0] in TOP_FOLDERS:
        return ref in index.files
    return any(f == ref or f.endswith("/" + ref) for f in index.files)


def resolves_test_id(index: Index, ref: str, name: str) -> bool:
    """`tests/test_docs.py::test_exit_codes_are_documented`: the file defines the name."""
    paths = [p for p in index.namespaces if p.relative_to(ROOT).as_posix().endswith(ref)]
    return any(name in index.namespaces[p] for p in paths)


@dataclass(frozen=True)
class Ref:
    kind: str  # "path", "test", "test name", "dotted", "member", "call"
    text: str
    offset: int
    extra: str = ""


def plain_refs(text: str) -> Iterator[Ref]:
    """The shapes that are references wherever they stand: `.py` paths, top-level folder paths, package names."""
    for found in PY_PATH.finditer(text):
        yield Ref("test" if found[2] else "path", found[1], found.start(), found[2] or "")
    for found in TOP_PATH.finditer(text):
        if not found[1].endswith(".py"):
            yield Ref("path", found[1], found.start())
    for found in DOTTED.finditer(text):
        if found[1].rsplit(".", 1)[-1] not in FILE_SUFFIXES:
            yield Ref("dotted", found[1], found.start())
    for found in TEST_NAME.finditer(text):
        yield Ref("test name", found[1], found.start())


def span_ref(index: Index, span: str, offset: int) -> Ref | None:
    """A code span that is a class's member, a module's name, a call or a path under a runtime package; else
    None."""
    span = span.strip()
    if SPAN_PATH.match(span) and "/" in span:
        return Ref("path", span, offset)
    shape = CHAIN.match(span)
    if not shape:
        return None
    parts = shape[1].split(".")
    if parts[0] in PREFIXES or parts[0] in K8S_FIELD_ROOTS or any(CAMEL_FIELD.match(p) for p in parts[1:]) \
            or parts[-1] in FILE_SUFFIXES:
        return None  # a package name or a file name is a plain reference already; a field path is not Python
    if len(parts) > 1 and parts[0][0].isupper():
        return Ref("member", shape[1], offset)
    if len(parts) > 1 and parts[0] in index.modules:
        return Ref("dotted", shape[1], offset)
    if shape[2] == "()":
        return Ref("call", shape[1] + "()", offset)
    return None


def refs_in(index: Index, text: str) -> Iterator[Ref]:
    yield from plain_refs(text)
    for found in CODE_SPAN.finditer(text):
        ref = span_ref(index, found[1], found.start(1))
        if ref:
            yield ref


def resolves(index: Index, ref: Ref) -> bool:
    if ref.text in EXCEPTIONS:
        EXCUSED.add(ref.text)
        return True
    if ref.kind == "path":
        return resolves_path(index, ref.text)
    if ref.kind == "test":
        return resolves_path(index, ref.text) and resolves_test_id(index, ref.text, ref.extra)
    if ref.kind == "member":
        parts = ref.text.split(".")
        return parts[0] in index.members and member_chain(index, parts)
    if ref.kind == "test name":
        return ref.text in index.defined or ref.text in index.modules
    if ref.kind == "call":
        name = ref.text[:-2].rsplit(".", 1)[-1]
        return name in index.defined or hasattr(builtins, name)
    return resolves_name(index, ref.text)


def resolves_name(index: Index, dotted: str) -> bool:
    """A module path; or an instance named like a module (`api.attacher.detach()`); or the chart's `settings` map
    keyed by a setting (`settings.FENCING`)."""
    parts = dotted.split(".")
    if parts[0] == "settings" and len(parts) == 2 and parts[1] in index.settings:
        return True
    return resolves_dotted(index, dotted) or (parts[0] not in PREFIXES and member_chain(index, parts))


def stale(index: Index, text: str, *, where: str, first_line: int) -> list[str]:
    """Each reference in text that resolves to nothing, as `file:line: reference`."""
    found = []
    for ref in refs_in(index, text):
        if not resolves(index, ref):
            line = first_line + text.count("\n", 0, ref.offset)
            found.append(f"{where}:{line}: {ref.text}" + (f"::{ref.extra}" if ref.extra else ""))
    return sorted(set(found), key=lambda s: (s.split(":")[0], int(s.split(":")[1]), s))


def python_texts(source: str, tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(first line, text) of each comment (by tokenize) and docstring (by ast) of a module."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in [tree, *statements(tree.body)]:
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                yield first.lineno, first.value.value


def stale_in_python(index: Index, path: Path, *, where: str) -> list[str]:
    source = path.read_text()
    tree = index.trees.get(path) or ast.parse(source)
    return [s for line, text in python_texts(source, tree) for s in stale(index, text, where=where, first_line=line)]


def markdown_text(path: Path) -> str:
    """The page with its code fence lines blanked (line numbers kept), so no backtick pairs across a fence."""
    return "\n".join("" if line.lstrip().startswith("```") else line for line in path.read_text().splitlines())


def all_stale(index: Index) -> list[str]:
    found = []
    for path in python_files():
        found += stale_in_python(index, path, where=path.relative_to(ROOT).as_posix())
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        found += stale(index, markdown_text(page), where=page.relative_to(ROOT).as_posix(), first_line=1)
    return found


INDEX = build_index()


def test_every_reference_in_comments_docstrings_and_docs_exists() -> None:
    assert "kube.api" in INDEX.modules and "rwo_failover.planner.liveness" in INDEX.modules  # the index is not empty
    found = all_stale(INDEX)
    assert not found, "these name nothing that exists (fix the text, or see EXCEPTIONS):\n" + "\n".join(found)
    assert set(EXCEPTIONS) - EXCUSED == set(), "no text names these any more: drop them from EXCEPTIONS"


PLANTED = """Made up, each one: rwo_failover/kube/apx.py, kube/gone.py, rwo_failover.kube.api.NoSuchThing,
planner.liveness.not_a_function, docs/no-such-page.md, deploy/nowhere, `Api.no_such_method`, `writer.NoWriter`,
`no_such_function()`, `run/nothing.py`, tests/test_docs.py::test_that_never_was, rwo_testkit.no_module,
test_a_test_that_never_was.
Real, each one: test_docs, test_exit_codes_are_documented, rwo_failover/kube/api.py, kube/api.py, `api.py`,
rwo_failover.kube.api, planner.liveness,
`Plan.wake_at`, `writer.Writer`, docs/safety.md, deploy/ha, `len()`, `spec.nodeName`, `status.result`.
"""
PLANTED_STALE = ["rwo_failover/kube/apx.py", "kube/gone.py", "rwo_failover.kube.api.NoSuchThing",
                 "planner.liveness.not_a_function", "docs/no-such-page.md", "deploy/nowhere", "Api.no_such_method",
                 "writer.NoWriter", "no_such_function()", "run/nothing.py",
                 "tests/test_docs.py::test_that_never_was", "rwo_testkit.no_module", "test_a_test_that_never_was"]


def test_the_scanner_reports_made_up_references(tmp_path: Path) -> None:
    """Each made-up name of each shape is reported, none of the real ones is; and a comment planted in a copy of a
    real module is reported at its line."""
    reported = [s.split(": ", 1)[1] for s in stale(INDEX, PLANTED, where="planted", first_line=1)]
    assert sorted(reported) == sorted(PLANTED_STALE)
    source = (ROOT / "rwo_failover" / "kube" / "api.py").read_text()
    assert stale_in_python(INDEX, ROOT / "rwo_failover" / "kube" / "api.py", where="api.py") == []
    copy = tmp_path / "api.py"
    copy.write_text(source + "\n# see kube.api.Api.gone_method\n")
    assert stale_in_python(INDEX, copy, where="api.py") == [
        f"api.py:{len(source.splitlines()) + 2}: kube.api.Api.gone_method"]
