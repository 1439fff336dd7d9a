"""Continuous mode's view of the cluster: lists kept current by watches, the way client-go's reflector does.

For each watched collection (nodes; with FENCING=networkfence the NetworkFences; our recovery records, by label,
in RECOVERY_NAMESPACE): list, then watch with bookmarks from the list's version, into a map of slim model objects:

- the first list asks for resourceVersion "0" (the API server's watch cache may answer, cheaply); every
  later one (after 410 Gone, after a watch fell behind, the periodic one) asks for the latest state (no
  resourceVersion), so a stale cache is never listed again;
- a watch that ends is resumed from the last version seen (an event's or a bookmark's); 410 Gone: relist;
- a watch silent for WATCH_STALE_SECONDS (no event, no bookmark; the API server bookmarks about every
  minute) has fallen behind: its read times out and it relists. A pass never decides from such a cache: it
  lists afresh first (`view`), in the spirit of KEP-5647's stale-cache circuit breaker; so does a cache
  whose resourceVersion stopped keeping up with the server's, however much it hears (progress.py);
- every failed round waits behind one back-off gate (backoff.py); every RELIST_SECONDS, a fresh list.
The cache is never the last word: act re-reads each node and its Lease live before every write. A change that
matters to a pass (a node's taints, its Ready condition; any change to a fence or a recovery record) calls
`on_change`; a heartbeat does not. An object that cannot be read is kept as an Unreadable, exactly as a list's
would be (model.reader.Reader), so a pass skips it with its reason.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

import urllib3
from kubernetes import watch as k8s_watch

from ..model import Reader, Unreadable, name_of
from ..settings import Settings
from .api import Api
from .backoff import SHORT_WATCH_SECONDS, Backoff
from .decode import DecodingWatch, Memo
from .lists import Event
from .progress import Progress, at_or_past
from .source import Source, cut
from .watch_failure import watch_failure

log = logging.getLogger(__name__)
T = TypeVar("T")


class Reflector(Generic[T]):
    """One collection, listed and then watched in a background thread."""

    def __init__(self, source: Source[T], new_api: Callable[[], Api], settings: Settings, *,
                 on_change: Callable[[str], None], metrics: Any = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.source, self.new_api, self.settings = source, new_api, settings
        self.on_change, self.metrics, self.monotonic = on_change, metrics, monotonic
        # By the object's name (namespace/name): what it reads as, or why it cannot be read.
        self.items: dict[str, T | Unreadable] = {}
        self.version = ""
        self.listed_at: float | None = None
        self.heard_at: float | None = None  # the last list, event or bookmark: how current the cache is
        self.events = 0  # received, bookmarks included (bench/intake.py)
        self.alive_at = monotonic()  # the watch thread's last sign of life, whatever the outcome
        self._lock = threading.Lock()
        self._list_lock = threading.Lock()
        self._generation = 0  # bumped by every list: events of an older stream are dropped
        self._moved = threading.Condition()  # notified whenever `version` moves (reached())
        self._watcher: k8s_watch.Watch | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.progress = Progress(settings.watch_stale_seconds)
        self._failing, self._began = "", float("inf")  # why it fails, logged once per change; when this watch began
        self._memo: Memo | None = None  # the last list's conversions, of objects no event has changed since

    # --- what a pass reads -----------------------------------------------------------------------------
    def age(self) -> float | None:
        """Seconds since the API server last told us anything about this collection; None before a list."""
        return None if self.heard_at is None else self.monotonic() - self.heard_at

    def behind(self) -> str | None:
        """Why this cache must not be decided from: never listed, silent too long, or its resourceVersion not
        keeping up with the server's (progress.py); None when it may be."""
        age = self.age()
        if age is None:
            return "not listed yet"
        if age > self.settings.watch_stale_seconds:
            return f"nothing heard for over {self.settings.watch_stale_seconds}s"
        return self.progress.behind(self.version, self.monotonic())

    def stale(self) -> bool:
        return self.behind() is not None

    def lagging(self) -> str | None:
        """Why a cache that is heard from is not making progress, or None."""
        return self.progress.behind(self.version, self.monotonic()) if self.listed_at is not None else None

    def reached(self, version: str, timeout: float) -> bool:
        """Whether the items hold the server's state at `version` or later, waiting up to `timeout` seconds:
        an event or bookmark at or past it was applied (a watch delivers in version order), or a list was made
        there. Versions compare as integers (etcd's revisions); any other version is never reached."""
        deadline = self.monotonic() + timeout
        with self._moved:
            while not at_or_past(self.version, version):
                left = deadline - self.monotonic()
                if left <= 0:
                    return False
                self._moved.wait(left)
        return True

    def current(self, api: Api) -> tuple[T | Unreadable, ...]:
        """The items (and Unreadables), listed afresh first (by the pass's Api) when the cache is empty or behind."""
        if self.stale():
            self.relist("initial" if self.listed_at is None else "no_progress" if self.lagging() else "stale", api)
        with self._lock:
            return tuple(self.items.values())

    def _read(self, raw: Any) -> tuple[str, T | Unreadable]:
        """The object's name and what it reads as; one that cannot be read becomes an Unreadable, as in a
        list (model.reader.Reader), so a pass skips it with its reason and never judges an older copy of it."""
        found = (reader := Reader()).parse(self.source.kind, self.source.from_json)(raw)
        return name_of(raw), (reader.unreadable[0] if found is None else found)

    # --- the thread -------------------------------------------------------------------------------------
    def start(self) -> None:
        # A stop event of its own per thread: a thread that outlived stop()'s join (blocked in a read) keeps its
        # set event and ends when it wakes, instead of running on beside the next one.
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(self._stop,), name=f"watch-{self.source.name}",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:  # whatever a stream still in flight delivers is of an older generation: dropped
            self._generation += 1
            self.items, self.version, self.listed_at, self.heard_at, self._memo = {}, "", None, None, None
            self.progress.clear()
        self._interrupt()
        if self._thread:
            self._thread.join(timeout=10)

    def _run(self, stop: threading.Event) -> None:
        """Rounds of list-and-watch, every failure behind one back-off gate (backoff.py)."""
        gate, relist, self._failing = Backoff(), "", ""  # a new thread logs its first failure
        while not stop.is_set():
            self.alive_at = self.monotonic()
            if self.listed_at is None:  # the first list is the first pass's (`current`): one list, not two
                stop.wait(0.05)
                continue
            outcome = self._round(stop, relist)
            if outcome is None or stop.is_set():
                continue  # we cut the stream ourselves (a list replaced the items): no verdict on the server
            if isinstance(outcome, bool):
                relist = ""
                if gate.failures:
                    log.info("watch healthy again", extra={"resource": self.source.name, "failures": gate.healthy()})
                continue
            reason, detail, relist = outcome
            if not relist and self.monotonic() - self._began >= SHORT_WATCH_SECONDS:
                gate.healthy()  # it ran well, then was cut (a proxy ending long connections): not a failure in a row
            if self.metrics:
                self.metrics.watch_restarted(self.source.name, reason)
            wait = gate.failed()
            # Once per change of state (healthy to failing, or another reason), never once per retry.
            if reason != self._failing:  # "" after a healthy watch
                log.warning("watch failing; backing off", extra={
                    "resource": self.source.name, "reason": reason, "error": detail,
                    "resource_version": self.version, "retry_in_seconds": round(wait, 1)})
            self._failing = reason
            stop.wait(wait)

    def _round(self, stop: threading.Event, relist: str) -> None | bool | tuple[str, str, str]:
        """A list if one is due, then one watch: True when the watch was healthy, None when we cut it, or the
        failure (reason, detail, the reason to list again before the next watch, "" to resume)."""
        self._began = float("inf")
        try:
            if relist:  # as client-go's reflector: after a watch error, list again, never resume blind
                self.relist(relist)
            if self.monotonic() - (self.listed_at or 0.0) >= self.settings.relist_seconds:
                self.relist("periodic")
            self._began, generation = self.monotonic(), self._generation
            self._watch_once(stop)
            if generation != self._generation:
                return None
            took = self.monotonic() - self._began
            if took < SHORT_WATCH_SECONDS:
                return "short", f"the watch ended after {took:.2f}s", ""
            self._failing = ""
            return True
        except Exception as err:  # which failure it was: watch_failure.py
            return watch_failure(err, relist, stale_seconds=self.settings.watch_stale_seconds,
                                 resource=self.source.name)

    def _watch_once(self, stop: threading.Event) -> None:
        """One watch stream, from the current version until it ends, breaks, or a list replaces the items."""
        with self._lock:
            generation, version = self._generation, self.version
            watcher = self._watcher = DecodingWatch(self.source.shape)
        # As the reflector: a random timeout in [5, 10) minutes, so many clients do not resume in step; and
        # never past the next periodic relist.
        until_relist = self.settings.relist_seconds - (self.monotonic() - (self.listed_at or self.monotonic()))
        timeout = int(max(1, min(random.uniform(300, 600), until_relist)))
        try:
            for event in self.source.watch(self.new_api(), self.settings, version, timeout, watcher):
                self.alive_at = self.monotonic()
                if stop.is_set() or not self._apply(event, generation):
                    watcher.stop()  # type: ignore[no-untyped-call]  # kubernetes' Watch.stop is unannotated
                    return
        except Exception:
            if stop.is_set() or generation != self._generation:
                return  # we cut it ourselves: a list replaced the items, or we are stopping
            raise

    def _apply(self, event: Event, generation: int) -> bool:
        """Apply one event; False when a list has replaced the items since this stream began."""
        if not isinstance(event, dict) or not isinstance(event.get("raw_object"), dict):
            raise urllib3.exceptions.ProtocolError("a watch line that is not a JSON event")
        kind, obj = event.get("type"), event["raw_object"]
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        changed = ""
        with self._lock:
            if generation != self._generation:
                return False
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                changed = self._store(kind, obj)
            if version:
                self.version = version
            self.heard_at = self.monotonic()
            self.events += 1
        with self._moved:
            self._moved.notify_all()
        if self.metrics:
            self.metrics.watch_event(self.source.name, str(kind))
        if changed:
            self.on_change(changed)
        return True

    def _store(self, kind: str, obj: dict[str, Any]) -> str:
        """Called with the lock held; what changed that matters to a pass, or ""."""
        key, item = self._read(obj)
        if self._memo is not None:
            self._memo.forget(key)
        old = self.items.pop(key, None)
        before = self.source.absent if old is None else self._signature(old)
        if kind != "DELETED":
            self.items[key] = item
            if before is not None and before == self._signature(item):
                return ""
        elif old is None or before == self.source.absent:
            return ""
        return f"{self.source.name} {key} {kind.lower()}"

    def _signature(self, item: T | Unreadable) -> Hashable:
        return item if isinstance(item, Unreadable) else self.source.signature(item, self.settings)

    # --- lists ------------------------------------------------------------------------------------------
    def relist(self, reason: str, api: Api | None = None) -> None:
        """List afresh and replace the items; the watch resumes from the new list's version."""
        with self._list_lock:
            if reason in ("initial", "stale", "no_progress") and not self.stale():
                return  # another thread listed while this one waited
            api, started = api or self.new_api(), self.monotonic()
            memo = Memo(self._read, self._memo, lambda found: found[0])  # converts only what changed since
            fresh = dict(self.source.list(api, self.settings, reason != "initial", memo))
            with self._lock:
                old, self.items = self.items, fresh
                self.version, self._generation = api.listed_version, self._generation + 1
                self.listed_at = self.heard_at = self.monotonic()
                self.progress.listed(started)
                self._memo = memo
            self._interrupt()  # the running stream is from before this list: it must not apply anything more
        with self._moved:  # a list made now holds "now" for reached()
            self._moved.notify_all()
        if self.metrics:
            self.metrics.relisted(self.source.name, reason)
        log.info("listed", extra={"resource": self.source.name, "reason": reason, "items": len(fresh),
                                  "resource_version": api.listed_version})
        changed = [k for k in old.keys() | fresh.keys() if k not in old or k not in fresh
                   or self._signature(old[k]) != self._signature(fresh[k])]
        if changed and reason != "initial":  # the first list is followed by a pass anyway
            self.on_change(f"{self.source.name} listed ({reason}): {len(changed)} changed")

    def _interrupt(self) -> None:
        """End the running stream now: Watch.stop() alone waits for the next event (a minute, or for ever while
        the open hangs), so the read is cut too."""
        watcher = self._watcher
        if watcher is not None:
            watcher.cancelled = True  # type: ignore[attr-defined]  # ours, on kubernetes' Watch
            watcher.stop()  # type: ignore[no-untyped-call]  # kubernetes' Watch.stop is unannotated
            cut(getattr(watcher, "response", None))
