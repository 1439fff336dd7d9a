"""Reading settings: flags and the environment, through the table, into Settings. This is the only module
that reads the environment, so a bad value fails before any API call."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from .. import __version__
from .checks import check_settings
from .errors import ConfigError
from .table import SPECS, Settings, Spec
from .urls import without_userinfo
from .values import boolean


class _Parser(argparse.ArgumentParser):
    """argparse, except that a bad argument is a ConfigError: one line, the same prefix and exit code as a bad
    setting, instead of the usage text and argparse's own exit."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{message}; see {self.prog} --help")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rwo-failover",
        description="Release ReadWriteOnce volumes held by pods on nodes that are proven down.",
        epilog="Every setting is also an environment variable: --max-nodes-per-pass is MAX_NODES_PER_PASS. "
               "A true/false setting's flag alone means true (--dry-run); --dry-run=false also works.",
        allow_abbrev=False,  # a typo must never silently mean another flag
    )
    parser.add_argument("--once", action="store_true", help="Run one pass and exit, whatever INTERVAL says.")
    parser.add_argument("--version", action="version", version=f"rwo-failover {__version__}")
    for spec in SPECS:
        # A boolean works bare, as kubectl's flags do; a value, when given, is parsed like the env var's.
        bare = spec.parse is boolean
        parser.add_argument(spec.flag, dest=spec.field, metavar=spec.name, default=None,
                            help=f"{spec.help} (default: {spec.default!r})",
                            nargs="?" if bare else None, const="true" if bare else None)
    return parser


def _resolve(spec: Spec, flag_value: str | None, environ: Mapping[str, str]) -> Any:
    source, raw = (spec.flag, flag_value) if flag_value is not None else (spec.name, environ.get(spec.name))
    if raw is None:
        return spec.parse(spec.default)
    if not raw.strip() and not spec.empty_ok:
        raise ConfigError(f"{source}: empty value is invalid; allowed: {spec.allowed}")
    try:
        return spec.parse(raw)
    except ValueError as err:
        detail = f" ({err})" if str(err) else ""
        shown = without_userinfo(raw) if spec.name.endswith("_URL") else raw  # a password is never echoed
        raise ConfigError(f"{source}={shown!r} is invalid{detail}; allowed: {spec.allowed}") from None


def load(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[argparse.Namespace, Settings]:
    """Parse flags and environment into Settings; raise ConfigError on any bad value."""
    args = build_parser().parse_args(list(argv))
    values = {spec.field: _resolve(spec, getattr(args, spec.field), environ) for spec in SPECS}
    settings = Settings(**values)
    check_settings(settings, once=args.once)
    return args, settings
