"""The deep path of kube/decode.py: an answer nested deeper than msgspec's recursion goes, read from ijson's
token stream keeping only the declared keys, without recursion (and never building what is skipped). An object
nested more than MAX_DEPTH levels, or holding a declared value nested more than MAX_KEPT_DEPTH, is one
unreadable object. Also the helpers both paths share: the decoders, and an unreadable object named."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import ijson
import msgspec

from ..model import Undecodable
from . import shapes

MAX_DEPTH = 512  # deeper than any object the API server writes for itself (a pod's fieldsV1 is ~15 levels)
MAX_KEPT_DEPTH = 16  # a declared value (a label, a condition) nested deeper is no value the API promises
Decoded = dict[str, Any] | Undecodable


def not_json(err: Exception) -> json.JSONDecodeError:
    """What json.loads raised for a body cut short: retried like one (kube/errors.py NO_ANSWER), logged alike."""
    return json.JSONDecodeError(f"the answer is not JSON ({str(err)[:200]})", "", 0)


@cache
def decoder(kind: type) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(kind)


def named(body: bytes, partial: Any, reason: str) -> Undecodable:
    meta = partial.get("metadata") if isinstance(partial, dict) else None
    if not isinstance(meta, dict):
        try:
            found = decoder(shapes.Named).decode(body).metadata
            meta = msgspec.to_builtins(found) if found else {}
        except (msgspec.DecodeError, RecursionError):
            meta = {}
    return Undecodable(meta, reason)


_PYTHON_BACKEND = ijson.get_backend("python")
LEAF = "leaf"  # a declared value of JSON types only (a string, a label map): built whole, up to MAX_KEPT_DEPTH


@dataclass(frozen=True)
class ListOf:
    item: Any


@dataclass(frozen=True)
class Unit:
    """One object of its own: too deep or of the wrong type, it alone is unreadable."""

    item: Any


@dataclass
class _Tokens:
    events: Iterator[tuple[str, Any]]
    depth: int = 0
    deepest: int = 0
    too_deep: bool = field(default=False)

    def next(self) -> tuple[str, Any]:
        event, value = next(self.events)
        if event in ("start_map", "start_array"):
            self.depth += 1
            self.deepest = max(self.deepest, self.depth)
        elif event in ("end_map", "end_array"):
            self.depth -= 1
        return event, value


@cache
def shape_tree(shape: type) -> Any:
    return _tree_of(msgspec.inspect.type_info(shape))


def _tree_of(info: Any) -> Any:
    if isinstance(info, msgspec.inspect.UnionType):
        kept = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
        return _tree_of(kept[0]) if len(kept) == 1 else LEAF
    if isinstance(info, msgspec.inspect.StructType):
        return {f.encode_name: _tree_of(f.type) for f in info.fields}
    if isinstance(info, msgspec.inspect.ListType):
        return ListOf(_tree_of(info.item_type))
    return LEAF


def deep(body: bytes, tree: Any, shape: type) -> Any:
    # yajl (the C backend) refuses integers past 64 bits anywhere in the document, which msgspec and json.loads
    # read; ijson's pure-Python backend reads them, as deep, only slower: the second try.
    for backend in (ijson, _PYTHON_BACKEND):
        tokens = _Tokens(backend.basic_parse(body, use_float=True))
        try:
            return _value(tokens, *tokens.next(), tree=tree, shape=shape)
        except (ijson.JSONError, StopIteration) as err:
            failed = err
    raise not_json(failed) from None


def _value(tokens: _Tokens, event: str, value: Any, *, tree: Any, shape: type) -> Any:
    """The value that starts with (event, value), pruned to `tree`; its tokens are consumed."""
    if isinstance(tree, Unit):
        return _unit(tokens, event, value, tree=tree.item, shape=shape)
    if event == "start_map" and isinstance(tree, dict):
        out: dict[str, Any] = {}
        while True:
            event, key = tokens.next()
            if event == "end_map":
                return out
            event, value = tokens.next()
            sub = tree.get(key)
            if sub is None:
                _skip(tokens, event)
            else:
                out[key] = _value(tokens, event, value, tree=sub, shape=shape)
    if event == "start_array" and isinstance(tree, ListOf):
        out_list: list[Any] = []
        while True:
            event, value = tokens.next()
            if event == "end_array":
                return out_list
            out_list.append(_value(tokens, event, value, tree=tree.item, shape=shape))
    return _build(tokens, event, value, depth=0)  # a leaf, or a value of another type than declared (judged later)


def _unit(tokens: _Tokens, event: str, value: Any, *, tree: Any, shape: type) -> Decoded:
    base, outer = tokens.depth - (event in ("start_map", "start_array")), (tokens.deepest, tokens.too_deep)
    tokens.deepest, tokens.too_deep = tokens.depth, False
    found = _value(tokens, event, value, tree=tree, shape=shape)
    depth, too_deep = tokens.deepest - base, tokens.too_deep
    tokens.deepest, tokens.too_deep = max(outer[0], tokens.deepest), outer[1]
    if depth > MAX_DEPTH or too_deep:
        return named(b"{}", found, f"nested {depth} levels deep: more than {MAX_DEPTH} (or a field the pass "
                                    f"reads more than {MAX_KEPT_DEPTH}) is no object the API server writes")
    try:
        built: dict[str, Any] = msgspec.to_builtins(msgspec.convert(found, shape))  # a Struct: its fields' dict
        return built
    except msgspec.ValidationError as err:
        return named(b"{}", found, str(err)[:300])


def _build(tokens: _Tokens, event: str, value: Any, *, depth: int) -> Any:
    if event == "start_map" or event == "start_array":
        if depth >= MAX_KEPT_DEPTH:
            tokens.too_deep = True
            _skip(tokens, event)
            return None
        end = "end_map" if event == "start_map" else "end_array"
        out: Any = {} if event == "start_map" else []
        while True:
            event, value = tokens.next()
            if event == end:
                return out
            if isinstance(out, dict):
                key, (event, value) = value, tokens.next()
                out[key] = _build(tokens, event, value, depth=depth + 1)
            else:
                out.append(_build(tokens, event, value, depth=depth + 1))
    return value


def _skip(tokens: _Tokens, event: str) -> None:
    """Consume a value the pass does not read, however deep, without building it."""
    if event not in ("start_map", "start_array"):
        return
    level = tokens.depth - 1
    while tokens.depth > level:
        tokens.next()
