"""Lists and watches over one Transport: pages decoded to the fields a pass reads (kube/decode.py) and
converted as they arrive, a page too long asked again shorter, restarts after an expired continue token, and
the event stream of a watch (kubernetes.watch.Watch does the streaming; decode.DecodingWatch the decoding)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

import urllib3
from kubernetes import watch as k8s_watch

from .decode import BadPage, Memo, decode_object, decode_page
from .errors import AnswerTooLarge, ApiError
from .transport import Transport

log = logging.getLogger(__name__)
MAX_LIST_RESTARTS = 3
# A page longer than this is left unread and asked again with a tenth of the limit: pods of 1.4 MB each (under
# the API server's 1.5 MiB object limit) would otherwise make a 500-pod page 700 MB (docs/performance.md).
MAX_PAGE_BYTES = 16 << 20
T = TypeVar("T")
Event = dict[str, Any] | None  # one watch event (type, object, raw_object), as the Watch hands it on


class Lister(Transport):
    """A Transport that also lists (paginated) and watches."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The lists (path and query) whose answer at resourceVersion "0", always whole, was over MAX_PAGE_BYTES:
        # listed without one for the rest of this pass (an Api is one pass), instead of being asked for 16 MiB
        # again. Not kept longer: the next pass asks the watch cache first again, so a list that is small again,
        # or one etcd cannot page during an outage, is served from it.
        self.too_large_whole: set[tuple[str, tuple[tuple[str, Any], ...]]] = set()
        self.consistent_reads = True  # what a list without an explicit `consistent` reads: see list_all

    def list_all(self, what: str, path: str, shape: type, *, convert: Callable[[dict[str, Any]], T],
                 page_factor: int = 1, query: list[tuple[str, Any]] | None = None, consistent: bool | None = None,
                 keep: Callable[[Any], bool] | None = None) -> list[T]:
        """Every item of a paginated list, each converted as its page arrives (so only slim objects are kept).
        Pages are decoded to `shape` (kube/shapes.py): only the fields a pass reads are built, and an item that
        cannot be decoded reaches `convert` as a model.Undecodable, which the Reader skips with its reason.

        When a continue token expires (410) the list restarts, at most MAX_LIST_RESTARTS times, and what the
        failed attempt had gathered is discarded: a restarted list never holds an object twice. The first
        page's resourceVersion (the list's snapshot) is left in `listed_version`. `consistent` reads the
        latest state (no resourceVersion) instead of whatever the API server's watch cache holds ("0"), which may
        lag etcd; by default (None) every list of a pass is consistent (`consistent_reads`): its brakes and its
        memory rest on current reads. Only what decides *when* a pass runs (the watch cache's own relists, one-shot
        mode's early look at the Leases) asks for version "0".
        `keep` drops, before conversion, the items the caller does not want (decode_page); a decode.Memo as
        `convert` converts again only what changed since the list it remembers.
        """
        memo = convert if isinstance(convert, Memo) else None
        consistent = self.consistent_reads if consistent is None else consistent
        for restart in range(MAX_LIST_RESTARTS + 1):
            items: list[T] = []
            try:
                pages = self._pages(what, path, shape, limit=self.settings.page_size * page_factor, query=query or [],
                                    consistent=consistent, keep=keep, memo=memo)
                for page in pages:
                    items.extend(page if memo is not None else (convert(obj) for obj in page))
                return items
            except ApiError as err:
                if err.status != 410 or restart == MAX_LIST_RESTARTS:
                    raise
                log.warning("list continue token expired; restarting the list", extra={"resource": what})
        raise AssertionError("unreachable")

    def latest_version(self, what: str, path: str, shape: type) -> str:
        """The collection's resourceVersion now: a consistent list (no resourceVersion: a quorum read) of one
        item, whose list version is the moment a consistent read of the whole collection would be at."""
        try:
            page = self.call("list", what, "GET", path, query=[("limit", 1)],
                             decode=lambda body: decode_page(body, shape), max_bytes=MAX_PAGE_BYTES)
        except BadPage as err:
            raise ApiError(f"list {what}: {err}") from None
        return page[2] if isinstance(page, tuple) else ""

    def _pages(self, what: str, path: str, shape: type, *, limit: int, query: list[tuple[str, Any]],
               consistent: bool = False, keep: Callable[[Any], bool] | None = None,
               memo: Memo | None = None) -> Iterator[list[Any]]:
        token, whole = None, (path, tuple(query))
        consistent = consistent or whole in self.too_large_whole
        while True:
            # resourceVersion=0 lets the API server answer from its watch cache instead of etcd; a slightly stale
            # list is fine because every node is re-read live before we act. It answers the whole collection,
            # whatever the limit (kube-apiserver v1.36.2, measured): only a list without one is paginated.
            position = [("continue", token)] if token else [] if consistent else [("resourceVersion", "0")]
            try:
                page = self.call("list", what, "GET", path, query=query + [("limit", limit)] + position,
                                 decode=lambda body: decode_page(body, shape, keep, memo=memo),
                                 max_bytes=MAX_PAGE_BYTES)
            except AnswerTooLarge:
                if not consistent:  # too large whole: paginated from now on, in this list and this pass's next
                    consistent = True
                    self.too_large_whole.add(whole)
                    log.warning("list too large to take whole from the watch cache; paginating it",
                                extra={"resource": what, "limit": limit})
                    continue
                if limit == 1:
                    raise ApiError(f"list {what}: one object is longer than {MAX_PAGE_BYTES} bytes") from None
                limit = max(1, limit // 10)  # for the rest of this list: its objects are big
                log.warning("list page too large; asking for fewer items", extra={"resource": what, "limit": limit})
                continue
            except BadPage as err:
                raise ApiError(f"list {what}: {err}") from None
            if page is None:
                return
            first = not token
            items, token, version = page if isinstance(page, tuple) else ([], None, "")
            if first:  # the list's snapshot: where a watch of it starts
                self.listed_version = version
            yield items
            if not token:
                return

    def read(self, what: str, path: str, shape: type) -> dict[str, Any] | None:
        """One object, decoded to `shape` as a list's items are (a model.Undecodable when it cannot be); None
        when it does not exist."""
        return self.call("get", what, "GET", path, decode=lambda body: decode_object(body, shape),
                         max_bytes=MAX_PAGE_BYTES)

    def watch(self, what: str, path: str, version: str, *, timeout_seconds: int, watcher: k8s_watch.Watch,
              query: list[tuple[str, Any]] | None = None) -> Iterator[Event]:
        """The events of one watch from `version`, with bookmarks, until the server ends it after
        `timeout_seconds`: dicts with "type" and "raw_object". An ERROR event raises ApiException (410 when
        the version is too old); a broken or silent stream raises urllib3's errors. Only opening is retried.

        kubernetes.watch.Watch does the streaming. It is given no model type (the opener's return annotation is
        Any, and it has no docstring), so it builds no model objects; a decode.DecodingWatch (the reflector's)
        decodes each line to the fields a pass reads, as a list's items are, instead of json.loads; and
        `timeout_seconds` turns off its own resume-after-410, so a 410 reaches the caller, which relists.
        `watcher.stop()`, from another thread, ends the stream at once.
        """
        def opener(**kwargs: Any) -> Any:
            params = list(query or []) + [("watch", "1"), ("allowWatchBookmarks", "true"),
                                          ("resourceVersion", kwargs["resource_version"]),
                                          ("timeoutSeconds", kwargs["timeout_seconds"])]
            response = self.call("watch", what, "GET", path, query=params, stream=True)
            if response is None:
                raise ApiError(f"watch {what}: not found (is its API installed?)", 404)
            # Kept on the watcher, so another thread can cut a read that waits for the next event; a watch
            # cancelled while it was opening is cut at once (watch.Reflector._interrupt).
            watcher.response = response  # type: ignore[attr-defined]  # ours, on kubernetes' Watch
            if getattr(watcher, "cancelled", False):
                response.release_conn()
                raise urllib3.exceptions.ProtocolError("the watch was cancelled while it opened")
            return response
        # Watch.stream is unannotated; it yields what unmarshal_event makes of each line: a dict (a plain Watch),
        # or a dict or None (a decode.DecodingWatch).
        stream = cast(Callable[..., Iterator[Event]], watcher.stream)
        return stream(opener, resource_version=version, timeout_seconds=timeout_seconds)
