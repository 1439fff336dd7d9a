"""API answers to the few fields a pass reads: a page, one object, or one watch event.

msgspec decodes straight into the kind's Struct (kube/shapes.py), so the keys a pass never reads (a tenant's
`managedFields`, 1.4 MB of it per pod, say) are skipped unbuilt: a page costs what a pass keeps. Each object
comes back as the small dict of its declared fields that its model type's from_json reads, or as a
`model.Undecodable` carrying its name and the reason: one object that cannot be read is one skip, never a
failed list. Three steps, each only when the one before cannot:

1. the whole page into its Structs (the fast path: every ordinary page);
2. a field of the wrong type somewhere: the page split into raw items, each decoded alone;
3. nesting deeper than msgspec's recursion goes (`fieldsV1` is client-writable, and the API server decodes
   10,000 levels): ijson's token stream, keeping only the declared keys without recursion, and an object
   nested more than MAX_DEPTH levels (or holding a declared value nested more than MAX_KEPT_DEPTH) is one
   unreadable object. The recursion limit is never raised: that segfaulted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Generic, Iterator, Optional, TypeVar, Union

import ijson
import msgspec
from kubernetes import watch as k8s_watch

from ..model import Undecodable
from . import shapes
from .errors import ApiError

MAX_DEPTH = 512  # deeper than any object the API server writes for itself (a pod's fieldsV1 is ~15 levels)
MAX_KEPT_DEPTH = 16  # a declared value (a label, a condition) nested deeper is no value the API promises
S = TypeVar("S")
Decoded = Union[dict, Undecodable]


class ListMeta(msgspec.Struct):
    resourceVersion: Optional[str] = None
    # `continue` is a Python keyword: the field is renamed
    token: Optional[str] = msgspec.field(default=None, name="continue")


class Page(msgspec.Struct, Generic[S]):
    metadata: Optional[ListMeta] = None
    items: Optional[list[S]] = None


class Envelope(msgspec.Struct):
    type: Optional[str] = None
    object: msgspec.Raw = msgspec.Raw(b"null")  # Raw cannot be Optional; JSON null is absent


class BadPage(ApiError):
    """The answer is no list of the expected shape (a proxy's page, say): a failed read, as before."""


def _not_json(err: Exception) -> json.JSONDecodeError:
    """What json.loads raised for a body cut short: retried like one (kube/errors.py NO_ANSWER), logged alike."""
    return json.JSONDecodeError(f"the answer is not JSON ({str(err)[:200]})", "", 0)


@lru_cache(maxsize=None)
def _decoder(kind: type) -> msgspec.json.Decoder:
    return msgspec.json.Decoder(kind)


def _named(body: bytes, partial: Any, reason: str) -> Undecodable:
    meta = partial.get("metadata") if isinstance(partial, dict) else None
    if not isinstance(meta, dict):
        try:
            found = _decoder(shapes.Named).decode(body).metadata
            meta = msgspec.to_builtins(found) if found else {}
        except (msgspec.DecodeError, RecursionError):
            meta = {}
    return Undecodable(meta, reason)


def decode_object(body: bytes, shape: type) -> Decoded:
    """One object (a GET's answer, a page's item, a watch event's object): its declared fields, or why not."""
    try:
        return msgspec.to_builtins(_decoder(shape).decode(body))
    except msgspec.ValidationError as err:
        return _named(body, None, str(err)[:300])
    except RecursionError:
        pass
    except msgspec.DecodeError as err:
        raise _not_json(err) from None
    return _deep(body, _Unit(_tree(shape)), shape)


def decode_page(body: bytes, shape: type) -> tuple[list[Decoded], Optional[str], str]:
    """A list page's items (see decode_object), its continue token and its resourceVersion."""
    try:
        page = _decoder(Page[shape]).decode(body)  # type: ignore[valid-type]
        items: list[Decoded] = [msgspec.to_builtins(item) for item in page.items or ()]
    except msgspec.ValidationError:
        try:
            page = _split(body)
        except RecursionError:  # a wrong type and, further on, an object too deep
            return _deep_page(body, shape)
        items = [decode_object(bytes(raw), shape) for raw in page.items or ()]
    except RecursionError:
        return _deep_page(body, shape)
    except msgspec.DecodeError as err:  # a body cut short, say: retried, as json.loads's error was
        raise _not_json(err) from None
    meta = page.metadata or ListMeta()
    return items, meta.token, meta.resourceVersion or ""


def _split(body: bytes) -> Page:
    try:
        return _decoder(Page[msgspec.Raw]).decode(body)
    except msgspec.ValidationError as err:
        raise BadPage(f"the answer is not a list of the expected shape: {err}") from None


def decode_event(line: bytes, shape: type) -> Optional[dict]:
    """A watch line as kubernetes.watch.Watch hands it on: type, object and raw_object (both the decoded
    object). An ERROR event's object is the server's Status, kept whole (Watch reads its code)."""
    try:
        envelope: Optional[Envelope] = _decoder(Envelope).decode(line)
    except (msgspec.DecodeError, RecursionError):  # DecodeError includes ValidationError
        envelope = None
    if envelope is None or bytes(envelope.object) == b"null":
        found = _deep(line, {"type": _LEAF, "object": _Unit(_tree(shape))}, shape) if envelope is None else {}
        kind = found.get("type") if isinstance(found, dict) else None
        obj = found.get("object") if isinstance(found, dict) else None
        if kind == "ERROR" or not isinstance(obj, dict):
            obj = {"code": 0, "reason": "Undecodable", "message": "a watch event that cannot be read"}
        return {"type": kind or "ERROR", "object": obj, "raw_object": obj}
    if envelope.type == "ERROR":
        try:
            status = json.loads(bytes(envelope.object))
        except (ValueError, RecursionError):
            status = None
        obj = status if isinstance(status, dict) and "code" in status else \
            {"code": 0, "reason": "Undecodable", "message": "an ERROR event that cannot be read"}
    else:
        obj = decode_object(bytes(envelope.object), shape)
    return {"type": envelope.type, "object": obj, "raw_object": obj}


class DecodingWatch(k8s_watch.Watch):
    """kubernetes.watch.Watch, each line decoded as above instead of json.loads: a watch builds no more of an
    object than a list does, and a deep or odd object is one unreadable object there too."""

    def __init__(self, shape: type) -> None:
        super().__init__()
        self.shape = shape

    def unmarshal_event(self, data: Any, return_type: Any) -> Optional[dict]:
        if not data or data.isspace():
            return None
        return decode_event(data.encode() if isinstance(data, str) else data, self.shape)


# --- the deep path: ijson tokens, declared keys only, no recursion into what is skipped -----------------------
_PYTHON_BACKEND = ijson.get_backend("python")
_LEAF = "leaf"  # a declared value of JSON types only (a string, a label map): built whole, up to MAX_KEPT_DEPTH


@dataclass(frozen=True)
class _ListOf:
    item: Any


@dataclass(frozen=True)
class _Unit:
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


@lru_cache(maxsize=None)
def _tree(shape: type) -> Any:
    return _tree_of(msgspec.inspect.type_info(shape))


def _tree_of(info: Any) -> Any:
    if isinstance(info, msgspec.inspect.UnionType):
        kept = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
        return _tree_of(kept[0]) if len(kept) == 1 else _LEAF
    if isinstance(info, msgspec.inspect.StructType):
        return {f.encode_name: _tree_of(f.type) for f in info.fields}
    if isinstance(info, msgspec.inspect.ListType):
        return _ListOf(_tree_of(info.item_type))
    return _LEAF


def _deep(body: bytes, tree: Any, shape: type) -> Any:
    # yajl (the C backend) refuses integers past 64 bits anywhere in the document, which msgspec and json.loads
    # read; ijson's pure-Python backend reads them, as deep, only slower: the second try.
    for backend in (ijson, _PYTHON_BACKEND):
        tokens = _Tokens(backend.basic_parse(body, use_float=True))
        try:
            return _value(tokens, *tokens.next(), tree, shape)
        except (ijson.JSONError, StopIteration) as err:
            failed = err
    raise _not_json(failed) from None


def _deep_page(body: bytes, shape: type) -> tuple[list[Decoded], Optional[str], str]:
    tree = {"metadata": {"continue": _LEAF, "resourceVersion": _LEAF}, "items": _ListOf(_Unit(_tree(shape)))}
    page = _deep(body, tree, shape)
    meta = page.get("metadata") if isinstance(page, dict) else None
    items = page.get("items") if isinstance(page, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    token, version = meta.get("continue"), meta.get("resourceVersion")
    if not isinstance(items, (list, type(None))) or not isinstance(token, (str, type(None))) or \
            not isinstance(version, (str, type(None))):
        raise BadPage("the answer is not a list of the expected shape")
    return items or [], token, version or ""


def _value(tokens: _Tokens, event: str, value: Any, tree: Any, shape: type) -> Any:
    """The value that starts with (event, value), pruned to `tree`; its tokens are consumed."""
    if isinstance(tree, _Unit):
        return _unit(tokens, event, value, tree.item, shape)
    if event == "start_map" and isinstance(tree, dict):
        out = {}
        while True:
            event, key = tokens.next()
            if event == "end_map":
                return out
            event, value = tokens.next()
            sub = tree.get(key)
            if sub is None:
                _skip(tokens, event)
            else:
                out[key] = _value(tokens, event, value, sub, shape)
    if event == "start_array" and isinstance(tree, _ListOf):
        out_list = []
        while True:
            event, value = tokens.next()
            if event == "end_array":
                return out_list
            out_list.append(_value(tokens, event, value, tree.item, shape))
    return _build(tokens, event, value, 0)  # a leaf, or a value of another type than declared (judged later)


def _unit(tokens: _Tokens, event: str, value: Any, tree: Any, shape: type) -> Decoded:
    base, outer = tokens.depth - (event in ("start_map", "start_array")), (tokens.deepest, tokens.too_deep)
    tokens.deepest, tokens.too_deep = tokens.depth, False
    found = _value(tokens, event, value, tree, shape)
    depth, too_deep = tokens.deepest - base, tokens.too_deep
    tokens.deepest, tokens.too_deep = max(outer[0], tokens.deepest), outer[1]
    if depth > MAX_DEPTH or too_deep:
        return _named(b"{}", found, f"nested {depth} levels deep: more than {MAX_DEPTH} (or a field the pass "
                                    f"reads more than {MAX_KEPT_DEPTH}) is no object the API server writes")
    try:
        return msgspec.to_builtins(msgspec.convert(found, shape))
    except msgspec.ValidationError as err:
        return _named(b"{}", found, str(err)[:300])


def _build(tokens: _Tokens, event: str, value: Any, depth: int) -> Any:
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
                out[key] = _build(tokens, event, value, depth + 1)
            else:
                out.append(_build(tokens, event, value, depth + 1))
    return value


def _skip(tokens: _Tokens, event: str) -> None:
    """Consume a value the pass does not read, however deep, without building it."""
    if event not in ("start_map", "start_array"):
        return
    level = tokens.depth - 1
    while tokens.depth > level:
        tokens.next()
