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
   nested more than deep.MAX_DEPTH levels (or holding a declared value nested more than MAX_KEPT_DEPTH) is one
   unreadable object. The recursion limit is never raised: that segfaulted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar, overload

import msgspec
from kubernetes import watch as k8s_watch

from .deep import LEAF, Decoded, ListOf, Unit, decoder, deep, named, not_json, shape_tree
from .errors import ApiError, OddAnswer

S = TypeVar("S")


class ListMeta(msgspec.Struct):
    resourceVersion: str | None = None
    # `continue` is a Python keyword: the field is renamed
    token: str | None = msgspec.field(default=None, name="continue")


class Page(msgspec.Struct, Generic[S]):
    metadata: ListMeta | None = None
    items: list[S] | None = None


class Envelope(msgspec.Struct):
    type: str | None = None
    object: msgspec.Raw = msgspec.Raw(b"null")  # Raw cannot be Optional; JSON null is absent


class Memo:
    """A conversion that remembers, for one list, what each item converted to, by a digest of what was decoded
    of it (its declared fields, encoded again): the next list of the collection converts only the items that
    changed. A watch cache relists all 5,000 nodes after every 410 (a storm of them: a list every few seconds
    while the back-off ramps up), nearly all of them unchanged; converting them again cost most of each list
    (bench/storms.py). Equal digests mean equal decoded fields (BLAKE2b, 128 bits), so a reused conversion is
    exactly the one the item would have been converted to. Called on a dict (an item read alone or from the
    token stream), it converts without remembering.

    `name_of` names what a conversion is of, so that `forget` drops it once the caller's own view has moved on
    (a watch replaced or deleted the object): kept past that, a tenant's deleted pods stayed in memory, and a
    watch held twice what its cache did, until its next relist (tests/test_convert_attack.py)."""

    def __init__(self, convert: Callable[[Decoded], Any], last: Memo | None = None,
                 name_of: Callable[[Any], Hashable] = id) -> None:
        self.convert, self.name_of = convert, name_of
        self.last: dict[bytes, Any] = last.now if last is not None else {}
        self.now: dict[bytes, Any] = {}
        self.keys: dict[Hashable, bytes] = {}  # the name of each conversion kept now, to its digest

    def __call__(self, item: Decoded) -> Any:
        return self.convert(item)

    def of(self, struct: Any) -> Any:
        key = hashlib.blake2b(_encode(struct), digest_size=16).digest()
        found = self.last.get(key, _MISSING)
        if found is _MISSING:
            found = self.convert(msgspec.to_builtins(struct))
        self.now[key] = found
        self.keys[self.name_of(found)] = key
        return found

    def forget(self, name: Hashable) -> None:
        """Drop what is kept of `name`: the object has changed or gone since the list."""
        self.now.pop(self.keys.pop(name, b""), None)


_MISSING = object()
_encode = msgspec.json.Encoder().encode


class BadPage(ApiError):
    """The answer is no list of the expected shape (a proxy's page, say): a failed read, as before."""


_JSON_KINDS = {b"[": "list", b'"': "str", b"t": "bool", b"f": "bool", b"n": "NoneType"}


def _odd(body: bytes) -> OddAnswer | None:
    """A complete answer whose top level is not an object (a proxy's, a broken server's) is judged as before the
    decoder, by transport's OddAnswer: retried like a body cut short, and named by its JSON kind."""
    head = body.lstrip()[:1]
    if not head or head == b"{":
        return None
    return OddAnswer(f"the answer is JSON {_JSON_KINDS.get(head, 'number')}, not an object")


@overload
def decode_object(body: bytes, shape: type, memo: None = None) -> Decoded: ...


@overload
def decode_object(body: bytes, shape: type, memo: Memo) -> Any: ...


def decode_object(body: bytes, shape: type, memo: Memo | None = None) -> Any:
    """One object (a GET's answer, a page's item, a watch event's object): its declared fields, or why not;
    converted by `memo` when there is one."""
    try:
        struct = decoder(shape).decode(body)
        return memo.of(struct) if memo is not None else msgspec.to_builtins(struct)
    except msgspec.ValidationError as err:
        found = named(body, None, str(err)[:300])
    except RecursionError:
        found = deep(body, Unit(shape_tree(shape)), shape)
    except msgspec.DecodeError as err:
        raise not_json(err) from None
    return found if memo is None else memo(found)


def decode_page(body: bytes, shape: type, keep: Callable[[Any], bool] | None = None, *,
                memo: Memo | None = None) -> tuple[list[Any], str | None, str]:
    """A list page's items (see decode_object), its continue token and its resourceVersion. `keep`, given a
    decoded Struct, says whether the pass wants it: the others are dropped before they are built into dicts and
    model objects (a claim list holds 20,000 claims for the 30 a pass reads). Only the fast path drops: an item
    read alone or from the token stream is kept, and judged by the caller as before. With a `memo`, the items
    come back converted by it (Memo)."""
    try:
        page = decoder(Page[shape]).decode(body)  # type: ignore[valid-type]  # a type chosen at run time
        build = msgspec.to_builtins if memo is None else memo.of
        items = [build(item) for item in page.items or () if keep is None or keep(item)]
    except msgspec.ValidationError:
        odd = _odd(body)
        if odd is not None:
            raise odd from None
        try:
            page = _split(body)
        except RecursionError:  # a wrong type and, further on, an object too deep
            return _converted(_deep_page(body, shape), memo)
        return [decode_object(bytes(raw), shape, memo) for raw in page.items or ()], *_position(page)
    except RecursionError:
        return _converted(_deep_page(body, shape), memo)
    except msgspec.DecodeError as err:  # a body cut short, say: retried, as json.loads's error was
        raise not_json(err) from None
    return items, *_position(page)


def _position(page: Page[Any]) -> tuple[str | None, str]:
    meta = page.metadata or ListMeta()
    return meta.token, meta.resourceVersion or ""


def _converted(page: tuple[list[Decoded], str | None, str], memo: Memo | None
               ) -> tuple[list[Any], str | None, str]:
    items, token, version = page
    return ([memo(item) for item in items] if memo is not None else items), token, version


def _split(body: bytes) -> Page[msgspec.Raw]:
    try:
        found: Page[msgspec.Raw] = decoder(Page[msgspec.Raw]).decode(body)
        return found
    except msgspec.ValidationError as err:
        raise BadPage(f"the answer is not a list of the expected shape: {err}") from None


def decode_event(line: bytes, shape: type) -> dict[str, Any] | None:
    """A watch line as kubernetes.watch.Watch hands it on: type, object and raw_object (both the decoded
    object). An ERROR event's object is the server's Status, kept whole (Watch reads its code)."""
    try:
        envelope: Envelope | None = decoder(Envelope).decode(line)
    except (msgspec.DecodeError, RecursionError):  # DecodeError includes ValidationError
        envelope = None
    if envelope is None or bytes(envelope.object) == b"null":
        found = deep(line, {"type": LEAF, "object": Unit(shape_tree(shape))}, shape) if envelope is None else {}
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
        super().__init__()  # type: ignore[no-untyped-call]  # kubernetes' Watch.__init__ is unannotated
        self.shape = shape

    def unmarshal_event(self, data: Any, return_type: Any) -> dict[str, Any] | None:
        if not data or data.isspace():
            return None
        return decode_event(data.encode() if isinstance(data, str) else data, self.shape)


def _deep_page(body: bytes, shape: type) -> tuple[list[Decoded], str | None, str]:
    tree = {"metadata": {"continue": LEAF, "resourceVersion": LEAF}, "items": ListOf(Unit(shape_tree(shape)))}
    page = deep(body, tree, shape)
    meta = page.get("metadata") if isinstance(page, dict) else None
    items = page.get("items") if isinstance(page, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    token, version = meta.get("continue"), meta.get("resourceVersion")
    if not isinstance(items, (list, type(None))) or not isinstance(token, (str, type(None))) or \
            not isinstance(version, (str, type(None))):
        raise BadPage("the answer is not a list of the expected shape")
    return items or [], token, version or ""
