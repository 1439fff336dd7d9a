"""Parsers and matchers for taint specs and label selectors.

Both are parsed once, when settings load, so a malformed value fails the run
before any API call. Matching is pure, so the planner can use it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Kubernetes qualified names: optional DNS-subdomain prefix, then a name part.
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_KEY_RE = re.compile(rf"^({_PREFIX}/)?{_NAME}$")
_VALUE_RE = re.compile(rf"^({_NAME})?$")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class MatcherError(ValueError):
    """A taint spec or label selector that cannot be parsed."""


@dataclass(frozen=True)
class TaintSpec:
    """`key[=value][:effect]`; an omitted value or effect matches any."""

    key: str
    value: str | None = None
    effect: str | None = None

    @classmethod
    def parse(cls, text: str) -> TaintSpec:
        rest, colon, effect = text.partition(":")
        key, eq, value = rest.partition("=")
        if not _KEY_RE.match(key):
            raise MatcherError(f"taint key {key!r} is not a valid qualified name")
        if eq and not _VALUE_RE.match(value):
            raise MatcherError(f"taint value {value!r} is not a valid label value")
        if colon and effect not in _EFFECTS:
            raise MatcherError(f"taint effect {effect!r} is not one of {', '.join(_EFFECTS)}")
        return cls(key, value if eq else None, effect if colon else None)

    def matches(self, taint: Mapping[str, str]) -> bool:
        if taint.get("key") != self.key:
            return False
        if self.value is not None and taint.get("value", "") != self.value:
            return False
        return self.effect is None or taint.get("effect") == self.effect

    def __str__(self) -> str:
        text = self.key
        if self.value is not None:
            text += f"={self.value}"
        return text + (f":{self.effect}" if self.effect else "")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # one of: =, !=, in, notin, exists, !exists
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        return not present or value not in self.values  # "!=" and "notin"


_SET_RE = re.compile(r"^\s*(?P<key>\S+)\s+(?P<op>in|notin)\s+\((?P<vals>[^()]*)\)\s*$")
_EQ_RE = re.compile(r"^\s*(?P<key>[^!=\s]+)\s*(?P<op>==|=|!=)\s*(?P<val>[^!=\s]*)\s*$")
_EXISTS_RE = re.compile(r"^\s*(?P<neg>!?)\s*(?P<key>[^!=\s()]+)\s*$")


@dataclass(frozen=True)
class LabelSelector:
    """The Kubernetes label selector string syntax (equality and set based)."""

    requirements: tuple[Requirement, ...] = ()
    text: str = ""

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        reqs = tuple(_parse_requirement(part) for part in _split_top_level(text))
        return cls(reqs, text.strip())

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(req.matches(labels) for req in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside `( … )` value sets."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth not in (0, 1):
            raise MatcherError(f"unbalanced parentheses in {text!r}")
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if depth:
        raise MatcherError(f"unbalanced parentheses in {text!r}")
    parts.append(current)
    if len(parts) == 1 and not parts[0].strip():
        return []
    return parts


def _parse_requirement(part: str) -> Requirement:
    for regex, build in ((_SET_RE, _set_req), (_EQ_RE, _eq_req), (_EXISTS_RE, _exists_req)):
        found = regex.match(part)
        if found:
            req = build(found)
            _check_key(req.key)
            for value in req.values:
                _check_value(value)
            return req
    raise MatcherError(f"cannot parse selector requirement {part.strip()!r}")


def _set_req(found: re.Match[str]) -> Requirement:
    values = tuple(v.strip() for v in found["vals"].split(","))
    return Requirement(found["key"], found["op"], values)


def _eq_req(found: re.Match[str]) -> Requirement:
    op = "!=" if found["op"] == "!=" else "="
    return Requirement(found["key"], op, (found["val"],))


def _exists_req(found: re.Match[str]) -> Requirement:
    return Requirement(found["key"], "!exists" if found["neg"] else "exists")


def _check_key(key: str) -> None:
    if not _KEY_RE.match(key):
        raise MatcherError(f"label key {key!r} is not a valid qualified name")


def _check_value(value: str) -> None:
    if not _VALUE_RE.match(value):
        raise MatcherError(f"label value {value!r} is not a valid label value")


def any_taint_matches(specs: Sequence[TaintSpec], taints: Sequence[Mapping[str, str]]) -> TaintSpec | None:
    """The first spec that matches any of the node's taints, else None."""
    for spec in specs:
        if any(spec.matches(t) for t in taints):
            return spec
    return None
