"""The crash switch: every pass crashes right after observe, in every process of the dev venv that runs one.

A safety test must assert what has to happen (an exit code, a skip reason, an Event), not only what must not:
"nothing was deleted" holds just as well for a pass that crashed. `python -m rwo_testkit.crash_check` runs the
fixture tier with this switch on and fails on every test that still passes (docs/testing.md).

It is not a monkeypatch of the kubernetes client, and not of anything a test sets up: while the check runs, a
.pth file in the venv's site-packages (written by crash_check, removed after) installs `install()` at the start
of every Python process of that venv. So it reaches reconcile.py run as a subprocess too, whatever environment
the test gives it. `install()` wraps `rwo_failover.run.runner.observe` when that module is first imported:
the real observe runs (every read of the pass is made), then RuntimeError, which run_pass does not catch: exit
70, as a bug right after observe would give, in one-shot and continuous mode alike.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

TARGET = "rwo_failover.run.runner"
MESSAGE = "crash switch: this pass crashes right after observe (rwo_testkit.crash_switch, docs/testing.md)"
PTH_NAME = "rwo_testkit_crash_switch.pth"  # sorts after rwo_testkit.pth, which makes rwo_testkit importable
PTH_LINE = "import rwo_testkit.crash_switch; rwo_testkit.crash_switch.install()\n"


def observe_then_crash(real: Callable[..., Any]) -> Callable[..., Any]:
    """runner.observe, then a crash: the snapshot is read and thrown away."""
    def observe(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        raise RuntimeError(MESSAGE)
    observe.crash_switch = True  # type: ignore[attr-defined]  # a mark of ours on the module
    return observe


def _patch(module: ModuleType) -> None:
    if not getattr(module.observe, "crash_switch", False):
        module.observe = observe_then_crash(module.observe)  # type: ignore[attr-defined]  # each module that imported observe


class _Finder(importlib.abc.MetaPathFinder):
    """Finds rwo_failover.run.runner as Python would, and patches it once it has been executed."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            execute(module)
            _patch(module)
        spec.loader.exec_module = exec_module  # type: ignore[method-assign]  # the loader of this one module only
        return spec


def install() -> None:
    if TARGET in sys.modules:
        _patch(sys.modules[TARGET])
    elif not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
