"""A small in-process Kubernetes API server for tests, the demo and the benchmark.

It speaks enough of the real API over HTTP for the official client, and it
enforces the semantics rwo-failover relies on, so tests fail for real reasons:
field and label selectors, limit/continue pagination (no resourceVersion with
continue; a list at resourceVersion "0" is answered whole, as kube-apiserver
does), DELETE with gracePeriodSeconds and a UID precondition (409 on a
mismatch), graceful deletion, finalizers, what a create resets and the CSI
external-attacher's finalizer (fake_lifecycle.py, checked against a real
kube-apiserver), Event namespace validation, bearer
token auth and per-verb RBAC denials, and watches (`?watch=1`, see fake_watch.py). Every request is logged.

kmock was evaluated first; its emulator has no field selectors, label
selectors, pagination or delete preconditions, so this is our own.
"""

from __future__ import annotations

import base64
import json
import random
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec

from rwo_failover.model.matchers import LabelSelector, MatcherError

from . import fake_lifecycle, fake_watch, managed_fields
from .fake_watch import Change, Cut, History, WatchRequest

TOKEN = "fake-apiserver-token"


@dataclass(frozen=True)
class Kind:
    plural: str
    kind: str
    api_version: str
    namespaced: bool
    field_labels: tuple[str, ...] = ("metadata.name", "metadata.namespace")
    # With a status subresource, a write to the object ignores status and a write to /status all but status.
    status_subresource: bool = True


KINDS = {k.plural: k for k in (
    Kind("nodes", "Node", "v1", False),
    Kind("pods", "Pod", "v1", True, ("metadata.name", "metadata.namespace", "spec.nodeName", "status.phase")),
    Kind("persistentvolumeclaims", "PersistentVolumeClaim", "v1", True),
    Kind("persistentvolumes", "PersistentVolume", "v1", False),
    Kind("events", "Event", "v1", True, status_subresource=False),
    Kind("configmaps", "ConfigMap", "v1", True, status_subresource=False),
    Kind("leases", "Lease", "coordination.k8s.io/v1", True, status_subresource=False),
    Kind("volumeattachments", "VolumeAttachment", "storage.k8s.io/v1", False),
    Kind("networkfences", "NetworkFence", "csiaddons.openshift.io/v1alpha1", False),
    # an install's workloads, which `status` reads its settings from
    Kind("cronjobs", "CronJob", "batch/v1", True),
    Kind("jobs", "Job", "batch/v1", True),
    Kind("deployments", "Deployment", "apps/v1", True),
)}
_BY_KIND = {(k.api_version, k.kind): k for k in KINDS.values()}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    verb: str
    resource: str
    namespace: str = ""
    name: str = ""
    subresource: str = ""  # "status" for /status
    body: Any = None
    status: int = 0
    response_bytes: int = 0
    user_agent: str = ""
    content_type: str = ""
    fault: str = ""  # the injected fault that hit this call, if any
    watch_fault: Fault | None = None
    at: float = field(default_factory=time.monotonic)  # when it arrived, on this process's monotonic clock

    @property
    def could_change(self) -> bool:
        """A write that could change something: a server-side dry run (?dryRun=All) changes nothing."""
        return self.method in ("POST", "PUT", "PATCH", "DELETE") and self.query.get("dryRun") != "All"


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    # Set by a fault: close the connection after sending this many body bytes.
    cut_after: int | None = None
    delay: float = 0.0
    trickle: float = 0.0  # seconds between pieces of the body (the "trickle" fault)
    stream: Iterator[bytes] | None = None  # a watch: sent chunked, one event a chunk, instead of `body`


class ApiStatus(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def now_text(at: float | None = None) -> str:
    """A Time as the API server writes it: whole seconds, truncated; `at` in seconds since the epoch (default:
    now)."""
    moment = datetime.now(UTC) if at is None else datetime.fromtimestamp(at, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _status_body(code: int, reason: str, message: str) -> bytes:
    return json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": message, "reason": reason, "code": code}).encode()


Hook = Callable[[Request], Response | None]
FAULT_KINDS = ("status", "reset", "timeout", "truncate", "expired-continue", "reshape", "trickle", "watch-drop",
               "watch-lag", "watch-gone", "watch-empty", "watch-behind")
TRICKLE_BYTES = 8
WATCH_FAULTS = ("watch-drop", "watch-lag", "watch-gone", "watch-empty", "watch-behind")


@dataclass
class Fault:
    """A seeded, switchable failure: which calls it hits, and what happens to them.

    kind "status" answers `status` (with Retry-After when given) instead of serving the call;
    "reset" sends half the body and closes the connection; "timeout" answers after `delay`
    seconds; "truncate" sends a cut JSON body with a matching Content-Length; "trickle" sends the headers at
    once and the body TRICKLE_BYTES at a time, `delay` seconds apart (each piece within any read timeout, the
    whole answer past every deadline); "expired-continue"
    answers 410 to list calls that carry a continue token; "reshape" serves the call (a write lands) and,
    when that succeeded, answers with `body` instead: complete JSON of another shape, as a proxy might. The
    watch faults hit watch calls only: "watch-drop" cuts the stream after `delay` seconds, "watch-lag" holds
    every event back for `delay` seconds, "watch-gone" answers the 410 ERROR event, "watch-empty" an empty 200,
    "watch-behind" delivers each change `delay` seconds late with bookmarks that never run ahead of what it
    delivered (fake_watch.py). `first`
    limits it to the first N
    matching calls; `fraction` to a seeded random share of them.
    """

    kind: str
    verb: str | None = None
    resource: str | None = None
    name: str | None = None
    status: int = 503
    retry_after: str | None = None
    delay: float = 1.0
    body: bytes = b""
    first: int | None = None
    fraction: float | None = None
    matched: int = 0
    fired: int = 0

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}")

    def applies(self, req: Request) -> bool:
        if (self.verb and req.verb != self.verb) or (self.resource and req.resource != self.resource):
            return False
        if self.name and req.name != self.name:
            return False
        if self.kind in WATCH_FAULTS:
            if req.verb != "watch":
                return False
        elif self.kind in ("reset", "timeout", "truncate", "trickle") and req.verb == "watch":
            return False  # a watch's body is a stream: its own faults cut or hold it
        return self.kind != "expired-continue" or "continue" in req.query


class FakeApiServer:
    """Start with `with FakeApiServer() as api:`; seed with `add`; inspect `requests`."""

    def __init__(self, version: str = "v1.36.0", seed: int = 0) -> None:
        self.version = version
        self.lock = threading.RLock()
        # Objects are kept only as encoded JSON and decoded on demand, so the benchmark's
        # 150,000 pods fit in memory and list pages are served by joining bytes.
        self.store: dict[str, dict[str, bytes]] = {plural: {} for plural in KINDS}
        self._pods_by_node: dict[str, set[str]] = {}
        self.resource_version = 1000
        self.requests: list[Request] = []
        self.denied: set[tuple[str, str]] = set()
        self.hooks: list[Hook] = []
        self.faults: list[Fault] = []
        self.random = random.Random(seed)
        self.listeners: list[Callable[[Request], None]] = []  # told of every request, e.g. a suite-wide log
        self.history = History(self.lock)  # the changes watches are served from
        self.bookmark_seconds = fake_watch.BOOKMARK_SECONDS
        self.omit_date_header = False  # as a proxy that strips Date would
        self.missing_namespaces: set[str] = set()  # creates there answer 404, as in a namespace never created
        self.missing_apis: set[str] = set()  # resources whose API is not installed: every call answers 404
        self.date_offset = 0.0  # seconds added to the Date header: a proxy sending its own, skewed Date
        # A list at resourceVersion "0" is served from kube-apiserver's watch cache, at whatever version it holds,
        # which may lag etcd (kubernetes#141887, KEP-5647): lag_watch_cache() freezes what such lists answer
        # until catch_up_watch_cache(). None: the cache is current (the kind case, and the default).
        self.watch_cache: tuple[int, dict[str, dict[str, bytes]]] | None = None
        # The server's wall clock, in seconds since the epoch: every stamp it writes (creationTimestamp, managedFields
        # times, deletionTimestamp) and its Date header. A test may freeze it, so that a stamp and the Date header of
        # the same answer are a known number of seconds apart whatever second boundary falls between them.
        self.clock: Callable[[], float] = time.time
        # The CSI external-attacher: a deleted VolumeAttachment stays until `attacher.detach()` (fake_lifecycle.py).
        self.attacher = fake_lifecycle.Attacher(self._update_metadata, lambda: self.objects("volumeattachments"),
                                                lambda name: self.get("nodes", name))
        self._server: ThreadingHTTPServer | None = None

    def lag_watch_cache(self) -> None:
        """From now on, lists at resourceVersion "0" answer the cluster as it is now, whatever changes after."""
        with self.lock:
            self.watch_cache = (self.resource_version, {plural: dict(objs) for plural, objs in self.store.items()})

    def catch_up_watch_cache(self) -> None:
        with self.lock:
            self.watch_cache = None

    # --- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> FakeApiServer:
        handler = type("Handler", (_Handler,), {"api": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        self.history.close()  # open watches end, as they do when an API server stops
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        assert self._server, "server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def write_kubeconfig(self, path: str, context: str = "fake") -> str:
        config = {"apiVersion": "v1", "kind": "Config", "current-context": context,
                  "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                  "users": [{"name": "fake", "user": {"token": TOKEN}}],
                  "contexts": [{"name": context, "context": {"cluster": "fake", "user": "fake"}}]}
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(config, handle)  # JSON is valid YAML
        return path

    # --- store ------------------------------------------------------------------------------
    def now_text(self) -> str:
        """This server's time, as it writes it in what it stores."""
        return now_text(self.clock())

    def _next_rv(self) -> str:
        self.resource_version += 1
        return str(self.resource_version)

    @staticmethod
    def _key(kind: Kind, namespace: str, name: str) -> str:
        return f"{namespace}/{name}" if kind.namespaced else name

    def add(self, obj: dict) -> dict:
        """Store an object as the API server would, filling uid, resourceVersion and timestamps."""
        kind = _BY_KIND[(obj.get("apiVersion", "v1"), obj["kind"])]
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", self.now_text())
        if kind.namespaced:
            meta.setdefault("namespace", "default")
        _seed_managed_fields(kind, obj, self.now_text())
        with self.lock:
            self._put(kind, obj)
        return obj

    def _put(self, kind: Kind, obj: dict) -> None:
        meta = obj["metadata"]
        meta["resourceVersion"] = self._next_rv()
        key = self._key(kind, meta.get("namespace", ""), meta["name"])
        old = self.store[kind.plural].get(key)
        # Kept with any `managed_fields.nested` marker unexpanded, so the fixture's own reads stay shallow; the
        # marker becomes the deep object only in what it serves (GET, list, watch).
        raw = self.store[kind.plural][key] = json.dumps(obj, separators=(",", ":")).encode()
        self.history.record(kind.plural, Change(self.resource_version, "MODIFIED" if old else "ADDED", key, raw, old))
        if kind.plural == "pods":  # indexed by the field as it is, whatever it holds (a hostile pod's, too)
            self._pods_by_node.setdefault(_field_value(obj, "spec.nodeName"), set()).add(key)

    def _remove(self, kind: Kind, key: str, obj: dict) -> dict:
        """Drop the stored object; `obj` is its decoded form, which the caller already has. As in the real
        API server, the deletion has a resourceVersion of its own, which the DELETED event carries."""
        old = self.store[kind.plural].pop(key)
        obj["metadata"]["resourceVersion"] = self._next_rv()
        raw = json.dumps(obj, separators=(",", ":")).encode()
        self.history.record(kind.plural, Change(self.resource_version, "DELETED", key, raw, old))
        if kind.plural == "pods":
            self._pods_by_node.get(_field_value(obj, "spec.nodeName"), set()).discard(key)
        return obj

    def get(self, plural: str, name: str, namespace: str = "") -> dict | None:
        with self.lock:
            raw = self.store[plural].get(self._key(KINDS[plural], namespace, name))
            return None if raw is None else _loads(raw)

    def objects(self, plural: str) -> list[dict]:
        with self.lock:
            return [_loads(raw) for raw in self.store[plural].values()]

    def delete_object(self, plural: str, name: str, namespace: str = "") -> dict | None:
        """Remove an object at once, as a controller's force delete (PodGC's, say) would; None when absent."""
        kind = KINDS[plural]
        key = self._key(kind, namespace, name)
        with self.lock:
            raw = self.store[plural].get(key)
            return None if raw is None else self._remove(kind, key, _loads(raw))

    def replace(self, obj: dict) -> dict:
        """Swap an object for a new one under the same name (a new UID), as a StatefulSet does."""
        kind = _BY_KIND[(obj.get("apiVersion", "v1"), obj["kind"])]
        with self.lock:
            key = self._key(kind, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            if key in self.store[kind.plural]:
                self._remove(kind, key, _loads(self.store[kind.plural][key]))
            obj["metadata"]["uid"] = str(uuid.uuid4())
            _seed_managed_fields(kind, obj, self.now_text())
            self._put(kind, obj)
        return obj

    def remove(self, plural: str, name: str, namespace: str = "") -> None:
        """Delete an object outright (no finalizers, no grace), as a controller's final delete does."""
        kind = KINDS[plural]
        with self.lock:
            key = self._key(kind, namespace, name)
            self._remove(kind, key, _loads(self.store[plural][key]))

    def _update_metadata(self, name: str, change: Callable[[dict], Any], plural: str = "volumeattachments", *,
                         namespace: str = "", manager: str = "csi-attacher") -> dict | None:
        """A controller's write to an object's metadata, as the API server stores an update (a finalizer removed
        from an object being deleted removes it); None when it is gone after. Not logged as a request."""
        kind = KINDS[plural]
        with self.lock:
            raw = self.store[plural].get(self._key(kind, namespace, name))
            if raw is None:
                return None
            old = _loads(raw)
            new = _loads(raw)
            change(new["metadata"])
            req = Request("PATCH", "", {}, "patch", plural, namespace, name, user_agent=f"{manager}/v0")
            self._write(kind, req, old, new=new)
            return self.get(plural, name, namespace)

    def deny(self, verb: str, plural: str) -> None:
        self.denied.add((verb, plural))

    def inject(self, fault: Fault) -> Fault:
        with self.lock:
            self.faults.append(fault)
        return fault

    def drop_watches(self) -> None:
        """Cut every open watch stream now, as a restarting API server does."""
        self.history.cut_all()

    def compact(self, plural: str) -> None:
        """Forget the retained changes of `plural` (etcd compaction): watching from an older version gets 410."""
        with self.lock:
            self.history.forget(plural, self.resource_version)

    def clear_faults(self) -> None:
        with self.lock:
            self.faults.clear()
            self.hooks.clear()
            self.denied.clear()

    def reset(self) -> None:
        """Empty the store, the log and every fault, keeping the server (and its port) running."""
        with self.lock:
            self.clear_faults()
            for objects in self.store.values():
                objects.clear()
            self._pods_by_node.clear()
            self.requests.clear()
            self.history.clear()

    def _fault_for(self, req: Request) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if not fault.applies(req):
                    continue
                fault.matched += 1
                if fault.first is not None and fault.matched > fault.first:
                    continue
                if fault.fraction is not None and self.random.random() >= fault.fraction:
                    continue
                fault.fired += 1
                return fault
        return None

    def mutations(self) -> list[Request]:
        """The requests that could change something (Request.could_change)."""
        return [r for r in self.requests if r.could_change]

    # --- request handling ----------------------------------------------------------------
    def handle(self, req: Request, auth: str) -> Response:
        for hook in list(self.hooks):
            found = hook(req)
            if found is not None:
                return found
        fault = self._fault_for(req)
        if fault is not None and fault.kind in ("status", "expired-continue"):
            code = 410 if fault.kind == "expired-continue" else fault.status
            headers = {"Content-Type": "application/json"}
            if fault.retry_after is not None:
                headers["Retry-After"] = fault.retry_after
            req.fault = fault.kind
            return Response(code, _status_body(code, "Injected", f"injected {fault.kind} {code}"), headers)
        if fault is not None and fault.kind in WATCH_FAULTS:
            req.fault = fault.kind
            req.watch_fault = fault
        response = self._serve(req, auth)
        if fault is not None and fault.kind not in WATCH_FAULTS:
            req.fault = fault.kind
            return _damage(response, fault)
        return response

    def _serve(self, req: Request, auth: str) -> Response:
        try:
            if auth != f"Bearer {TOKEN}":
                raise ApiStatus(401, "Unauthorized", "Unauthorized")
            if req.verb == "version":
                parts = self.version.lstrip("v").split(".")
                return self._json(200, {"major": parts[0], "minor": parts[1] if len(parts) > 1 else "",
                                        "gitVersion": self.version})
            if (req.verb, req.resource) in self.denied:
                raise ApiStatus(403, "Forbidden",
                                f'{req.resource} is forbidden: User "system:serviceaccount:rwo-failover:rwo-failover" '
                                f'cannot {req.verb} resource "{req.resource}"')
            self._check_exists(req)
            with self.lock:
                return getattr(self, f"_do_{req.verb}")(req)
        except ApiStatus as err:
            return Response(err.code, _status_body(err.code, err.reason, err.message),
                            {"Content-Type": "application/json"})
        except Exception as err:
            return Response(500, _status_body(500, "InternalError", f"fixture: {type(err).__name__}: {err}"),
                            {"Content-Type": "application/json"})

    def _check_exists(self, req: Request) -> None:
        """As the real server: every call to a resource whose API is not installed (a CRD never applied) is 404,
        and so is a create in a namespace that does not exist (a list there is only empty)."""
        if req.resource in self.missing_apis:
            raise ApiStatus(404, "NotFound", "the server could not find the requested resource")
        if req.verb == "create" and req.namespace in self.missing_namespaces:
            raise ApiStatus(404, "NotFound", f'namespaces "{req.namespace}" not found')

    @staticmethod
    def _json(status: int, obj: Any) -> Response:
        return Response(status, json.dumps(obj, separators=(",", ":")).encode(),
                        {"Content-Type": "application/json"})

    def _stored(self, req: Request) -> tuple[Kind, str, bytes]:
        kind = KINDS[req.resource]
        key = self._key(kind, req.namespace, req.name)
        raw = self.store[kind.plural].get(key)
        if raw is None:
            raise ApiStatus(404, "NotFound", f'{req.resource} "{req.name}" not found')
        return kind, key, raw

    def _find(self, req: Request) -> tuple[Kind, str, dict]:
        kind, key, raw = self._stored(req)
        return kind, key, _loads(raw)

    def _do_get(self, req: Request) -> Response:
        return Response(200, managed_fields.expand(self._stored(req)[2]), {"Content-Type": "application/json"})

    def _do_list(self, req: Request) -> Response:
        kind = KINDS[req.resource]
        at_zero = req.query.get("resourceVersion") == "0"
        objects, version = self.store[kind.plural], self.resource_version
        if at_zero and self.watch_cache is not None:  # a lagging watch cache answers, at its own version
            version, stores = self.watch_cache
            objects = stores[kind.plural]
            keys = sorted(k for k in objects if not (kind.namespaced and req.namespace)
                          or k.startswith(req.namespace + "/"))
        else:
            keys = self._candidate_keys(kind, req)
        matches = _selector_filter(kind, objects, keys, req=req)
        # As kube-apiserver v1.36.2 (measured): a list at resourceVersion "0" is served whole from its watch cache,
        # whatever the limit; only a list without a resourceVersion is paginated.
        limit = 0 if at_zero else int(req.query.get("limit") or 0)
        start = _decode_continue(req.query) if "continue" in req.query else None
        if start is not None:
            matches = [k for k in matches if k > start]
        page, rest = (matches[:limit], matches[limit:]) if limit else (matches, [])
        meta: dict[str, Any] = {"resourceVersion": str(version)}
        if rest:
            meta["continue"] = base64.urlsafe_b64encode(json.dumps({"start": page[-1]}).encode()).decode()
            meta["remainingItemCount"] = len(rest)
        head = json.dumps({"kind": kind.kind + "List", "apiVersion": kind.api_version, "metadata": meta})
        items = managed_fields.expand(b",".join(objects[k] for k in page))
        body = head[:-1].encode() + b',"items":[' + items + b"]}"
        return Response(200, body, {"Content-Type": "application/json"})

    def _do_watch(self, req: Request) -> Response:
        """A watch, served from the retained changes (fake_watch.py); the stream runs outside the lock."""
        kind = KINDS[req.resource]
        matches = _event_filter(kind, req)
        asked = req.query.get("resourceVersion", "")
        initial: list[bytes] = []
        if asked in ("", "0"):
            keys = _selector_filter(kind, self.store[kind.plural], self._candidate_keys(kind, req), req=req)
            initial, start = [self.store[kind.plural][k] for k in keys], self.resource_version
        else:
            try:
                start = int(asked)
            except ValueError:
                raise ApiStatus(400, "BadRequest", f'invalid resource version "{asked}"') from None
        fault = req.watch_fault
        watch = WatchRequest(kind.plural, kind.kind, kind.api_version, start, initial,
                             float(req.query.get("timeoutSeconds") or fake_watch.WATCH_TIMEOUT_SECONDS),
                             req.query.get("allowWatchBookmarks") in ("true", "1"), self.bookmark_seconds, matches,
                             fault.kind if fault else "", fault.delay if fault else 0.0,
                             req.namespace if kind.namespaced else "")
        return Response(200, b"", {"Content-Type": "application/json"},
                        stream=fake_watch.stream(self.history, lambda: self.resource_version, watch))

    def _candidate_keys(self, kind: Kind, req: Request) -> list[str]:
        selected = _field_terms(kind, req.query.get("fieldSelector", ""))
        node = next((v for f, op, v in selected if f == "spec.nodeName" and op == "="), None)
        if kind.plural == "pods" and node is not None:
            keys = set(self._pods_by_node.get(node, ()))  # the real API server indexes pods by node too
        else:
            keys = set(self.store[kind.plural])
        if kind.namespaced and req.namespace:
            keys = {k for k in keys if k.startswith(req.namespace + "/")}
        return sorted(keys)

    def _do_create(self, req: Request) -> Response:
        kind = KINDS[req.resource]
        obj = req.body if isinstance(req.body, dict) else {}
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:10]
        if not meta.get("name"):
            raise ApiStatus(422, "Invalid", "metadata.name: Required value")
        if kind.plural != "events" and (len(meta["name"]) > 253 or not _DNS_SUBDOMAIN.match(meta["name"])):
            # As the API server checks the other kinds rwo-failover creates (NameIsDNSSubdomain): ConfigMaps,
            # Leases, NetworkFences. A core/v1 Event's name is not checked (kube-apiserver v1.36.2 created one
            # named "<199 a>-.<16 hex>", and refused the same name for a ConfigMap).
            raise ApiStatus(422, "Invalid", f"metadata.name: Invalid value: {meta['name']!r}: a lowercase RFC 1123 "
                                            "subdomain must consist of lower case alphanumeric characters, '-' or "
                                            "'.', and must start and end with an alphanumeric character")
        _check_annotations(meta)
        if kind.namespaced:
            if meta.get("namespace", req.namespace) != req.namespace:
                raise ApiStatus(400, "BadRequest", "the namespace of the object does not match the request")
            meta["namespace"] = req.namespace
        if kind.plural == "events":
            _validate_event(obj, req.namespace)
        if self._key(kind, req.namespace, meta["name"]) in self.store[kind.plural]:
            raise ApiStatus(409, "AlreadyExists", f'{req.resource} "{meta["name"]}" already exists')
        obj.setdefault("apiVersion", kind.api_version)
        obj.setdefault("kind", kind.kind)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = self.now_text()
        meta.pop("generation", None)
        fake_lifecycle.reset_on_create(kind.plural, obj, self.clock())  # a created pod's status is dropped, and so on
        managed_fields.stamp(None, obj, _manager(req), subresource="", now=meta["creationTimestamp"],
                             api_version=kind.api_version)
        if req.query.get("dryRun") == "All":  # the real server answers as if created, stamps included
            return self._json(201, obj)
        self._put(kind, obj)
        return self._json(201, obj)

    def _do_patch(self, req: Request) -> Response:
        """JSON merge patch (RFC 7386); a metadata.resourceVersion in it is a precondition, as in the real API."""
        if not req.content_type.startswith("application/merge-patch+json"):
            raise ApiStatus(415, "UnsupportedMediaType", f"the fixture serves merge patches, not {req.content_type!r}")
        kind, _key, obj = self._find(req)
        patch = req.body if isinstance(req.body, dict) else {}
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None:
            _check_resource_version(req, obj, wanted)
        merged = _merge_patch(obj, patch)
        merged["metadata"]["uid"] = obj["metadata"]["uid"]
        return self._write(kind, req, obj, new=merged)

    def _write(self, kind: Kind, req: Request, old: dict, *, new: dict) -> Response:
        """Store the result of an update or patch as the real server does: a status subresource sees only its
        part; a write that changes nothing is not stored (same resourceVersion, no new managedFields time); a
        spec change is a new generation; the writer's managedFields entry is stamped with the server's time."""
        if kind.status_subresource:
            new = _only_status(old, new) if req.subresource == "status" else dict(new, status=old.get("status"))
            if new.get("status") is None:
                new.pop("status")
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        _check_annotations(new["metadata"])
        if not managed_fields.changed(old, new):
            return self._json(200, old)
        if fake_lifecycle.delete_during_update(old, new):  # the last finalizer of an object being deleted went
            key = self._key(kind, old["metadata"].get("namespace", ""), old["metadata"]["name"])
            return self._json(200, self._remove(kind, key, new))
        if new.get("spec") != old.get("spec") and kind.plural in fake_lifecycle.GENERATION_KINDS:
            new["metadata"]["generation"] = int(old["metadata"].get("generation") or 1) + 1
        managed_fields.stamp(old, new, _manager(req), subresource=req.subresource, now=self.now_text(),
                             api_version=kind.api_version)
        self._put(kind, new)
        return self._json(200, new)

    def _do_update(self, req: Request) -> Response:
        """PUT: a whole object; metadata.resourceVersion, when given, must match (409 otherwise), as in the real API."""
        kind, _key, obj = self._find(req)
        body = req.body if isinstance(req.body, dict) else {}
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted:
            _check_resource_version(req, obj, wanted)
        body.setdefault("metadata", {}).update(uid=obj["metadata"]["uid"], name=req.name,
                                               creationTimestamp=obj["metadata"].get("creationTimestamp"))
        if kind.namespaced:
            body["metadata"]["namespace"] = req.namespace
        body.setdefault("apiVersion", kind.api_version)
        body.setdefault("kind", kind.kind)
        return self._write(kind, req, obj, new=body)

    def _do_delete(self, req: Request) -> Response:
        kind, key, obj = self._find(req)
        options = req.body if isinstance(req.body, dict) else {}
        preconditions = options.get("preconditions") or {}
        wanted_uid, wanted_rv = preconditions.get("uid"), preconditions.get("resourceVersion")
        meta = obj["metadata"]
        # As apiserver's etcd3 store: a precondition given is checked, an empty one included (no object meets it).
        if wanted_uid is not None and wanted_uid != meta["uid"]:
            raise ApiStatus(409, "Conflict", f"Precondition failed: UID in precondition: {wanted_uid}, "
                                             f"UID in object meta: {meta['uid']}")
        if wanted_rv is not None and wanted_rv != meta["resourceVersion"]:
            raise ApiStatus(409, "Conflict", f"Precondition failed: ResourceVersion in precondition: {wanted_rv}, "
                                             f"ResourceVersion in object meta: {meta['resourceVersion']}")
        # Graceful deletion and finalizers as kube-apiserver has them (fake_lifecycle.delete): a scheduled pod is
        # marked Terminating until now + its grace, a finalizer keeps anything; the answer is the object.
        stays, changed = fake_lifecycle.delete(kind.plural, obj, options, query=req.query, now=self.clock())
        if not stays:
            return self._json(200, self._remove(kind, key, obj))
        if changed:
            self._put(kind, obj)
        return self._json(200, obj)


def _manager(req: Request) -> str:
    return managed_fields.manager_of(req.user_agent, req.query.get("fieldManager", ""))


def _only_status(old: dict, new: dict) -> dict:
    kept = json.loads(json.dumps(old))
    kept["status"] = new.get("status")
    return kept


def _seed_managed_fields(kind: Kind, obj: dict, now: str) -> None:
    """An object seeded without managedFields was, as far as anyone can tell, written just now."""
    meta = obj["metadata"]
    if meta.get("managedFields") is None:
        managed_fields.stamp(None, obj, "fixture-seed", subresource="", now=now, api_version=kind.api_version)
        if kind.status_subresource and obj.get("status"):
            managed_fields.stamp(obj, obj, "fixture-seed", subresource="status", now=now, api_version=kind.api_version)


ANNOTATIONS_LIMIT = 256 * 1024  # apimachinery's TotalAnnotationSizeLimitB: keys and values, in bytes


def _check_annotations(meta: dict) -> None:
    """As the real API server validates every create, update and patch of any kind: all annotations together, keys
    and values, at most 256 KiB (422 otherwise)."""
    notes = meta.get("annotations") or {}
    size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in notes.items()) if isinstance(notes, dict) \
        else 0
    if size > ANNOTATIONS_LIMIT:
        raise ApiStatus(422, "Invalid", f"metadata.annotations: Too long: must have at most {ANNOTATIONS_LIMIT} bytes")


def _check_resource_version(req: Request, obj: dict, wanted: str) -> None:
    """A write carrying metadata.resourceVersion is preconditioned on it, as in the real API: 409 otherwise."""
    if wanted != obj["metadata"]["resourceVersion"]:
        raise ApiStatus(409, "Conflict", f'Operation cannot be fulfilled on {req.resource} "{req.name}": '
                                         "the object has been modified; please apply your changes to the latest "
                                         "version")


def _merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


def _damage(response: Response, fault: Fault) -> Response:
    if fault.kind == "reset":
        response.cut_after = len(response.body) // 2
    elif fault.kind == "timeout":
        response.delay = fault.delay
    elif fault.kind == "trickle":
        response.trickle = fault.delay
    elif fault.kind == "truncate":
        response.body = response.body[: max(1, len(response.body) // 2)]
    elif fault.kind == "reshape" and 200 <= response.status <= 299:
        response.body = fault.body
    return response






_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _validate_event(obj: dict, namespace: str) -> None:
    involved = obj.get("involvedObject") or {}
    if not involved.get("kind") or not involved.get("name"):
        raise ApiStatus(422, "Invalid", "involvedObject: kind and name are required")
    if involved.get("namespace") and involved["namespace"] != namespace:
        raise ApiStatus(422, "Invalid", "involvedObject.namespace: does not match event.namespace")
    if not obj.get("reason") or obj.get("type") not in ("Normal", "Warning"):
        raise ApiStatus(422, "Invalid", "reason is required and type must be Normal or Warning")


def _decode_continue(query: dict[str, str]) -> str:
    if query.get("resourceVersion"):
        raise ApiStatus(400, "BadRequest", "specifying resource version is not allowed when using continue")
    try:
        return json.loads(base64.urlsafe_b64decode(query["continue"].encode()))["start"]
    except (ValueError, KeyError, TypeError):
        raise ApiStatus(400, "BadRequest", "continue key is not valid") from None


def _field_terms(kind: Kind, text: str) -> list[tuple[str, str, str]]:
    terms = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        op = "!=" if "!=" in part else "=="if "==" in part else "="
        name, _, value = part.partition(op)
        if name not in kind.field_labels:
            raise ApiStatus(400, "BadRequest", f'field label not supported: "{name}"')
        terms.append((name, "=" if op == "==" else op, value))
    return terms


def _field_value(obj: dict, path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = (value or {}).get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def _event_filter(kind: Kind, req: Request) -> Callable[[bytes], bool] | None:
    """The request's field and label selectors as a test on an encoded object; None when there are none."""
    terms = _field_terms(kind, req.query.get("fieldSelector", ""))
    try:
        labels = LabelSelector.parse(req.query.get("labelSelector", ""))
    except MatcherError as err:
        raise ApiStatus(400, "BadRequest", f"unable to parse requirement: {err}") from None
    if not terms and not labels:
        return None

    def matches(raw: bytes) -> bool:
        obj = _selectable(raw)
        return all((_field_value(obj, f) == v) == (op == "=") for f, op, v in terms) and \
            labels.matches((obj.get("metadata") or {}).get("labels") or {})
    return matches


class _SelectableMeta(msgspec.Struct):
    name: Any = None
    namespace: Any = None
    labels: Any = None


class _Selectable(msgspec.Struct):
    metadata: _SelectableMeta = msgspec.field(default_factory=_SelectableMeta)
    spec: Any = None
    status: Any = None


def _selectable(raw: bytes) -> Any:
    """What a field or label selector can name (no managedFields): a filter over 1.4 MB pods stays fast."""
    try:
        found = msgspec.json.decode(raw, type=_Selectable)
    except msgspec.DecodeError:
        return _loads(raw)
    return {"metadata": msgspec.structs.asdict(found.metadata), "spec": found.spec, "status": found.status}


def _loads(raw: bytes) -> Any:
    """A stored object, decoded: msgspec is several times faster than json on the 1.4 MB pods of issue 26's
    tests; json.loads for what msgspec declines (integers past 64 bits, from the hostile-input tests)."""
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return json.loads(raw)


def _selector_filter(kind: Kind, objects: dict[str, bytes], keys: list[str], *, req: Request) -> list[str]:
    matches = _event_filter(kind, req)
    return keys if matches is None else [key for key in keys if matches(objects[key])]


def route(method: str, path: str, query: dict[str, str]) -> Request:
    """Map an HTTP request onto (verb, resource, namespace, name), as the API server's router does."""
    parts = [p for p in path.split("/") if p]
    if parts == ["version"]:
        return Request(method, path, query, "version", "")
    if parts[:2] == ["api", "v1"]:
        rest = parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        rest = parts[3:]
    else:
        raise ApiStatus(404, "NotFound", f"the server could not find the requested resource {path}")
    namespace = ""
    if len(rest) >= 2 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    subresource = ""
    if len(rest) == 3 and rest[2] == "status" and rest[0] in KINDS and KINDS[rest[0]].status_subresource:
        rest, subresource = rest[:2], "status"
    if not rest or rest[0] not in KINDS or len(rest) > 2:
        raise ApiStatus(404, "NotFound", f"the server could not find the requested resource {path}")
    name = rest[1] if len(rest) == 2 else ""
    verbs = {("GET", True): "get", ("GET", False): "list", ("POST", False): "create",
             ("DELETE", True): "delete", ("PATCH", True): "patch", ("PUT", True): "update"}
    verb = verbs.get((method, bool(name)))
    if verb == "list" and query.get("watch") in ("1", "true"):
        verb = "watch"
    if verb is None or (subresource and verb not in ("get", "patch", "update")):
        raise ApiStatus(405, "MethodNotAllowed", f"{method} is not supported on {path}")
    return Request(method, path, query, verb, rest[0], namespace, name, subresource)


class _Handler(BaseHTTPRequestHandler):
    api: FakeApiServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle plus delayed ACK adds 40 ms each.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send_response(self, code: int, message: str | None = None) -> None:
        """http.server's, with the Date header optional (a proxy may strip it)."""
        self.log_request(code)
        self.send_response_only(code, message)
        self.send_header("Server", self.version_string())
        if not self.api.omit_date_header:
            self.send_header("Date", self.date_time_string(self.api.clock() + self.api.date_offset))

    def _serve(self) -> None:
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            req = route(self.command, split.path, query)
            req.body = json.loads(raw) if raw else None
            req.content_type = self.headers.get("Content-Type", "")
            req.user_agent = self.headers.get("User-Agent", "")
            response = self.api.handle(req, self.headers.get("Authorization", ""))
        except ApiStatus as err:
            req = Request(self.command, split.path, query, "", "")
            response = Response(err.code, _status_body(err.code, err.reason, err.message),
                                {"Content-Type": "application/json"})
        except ValueError:
            req = Request(self.command, split.path, query, "", "")
            response = Response(400, _status_body(400, "BadRequest", "request body is not JSON"))
        req.status, req.response_bytes = response.status, len(response.body)
        req.user_agent = self.headers.get("User-Agent", "")
        with self.api.lock:
            self.api.requests.append(req)
            for listener in self.api.listeners:
                listener(req)
        self._send(response, req)

    def _send(self, response: Response, req: Request) -> None:
        try:
            if response.stream is not None:
                self._write_stream(response, req)
            else:
                self._write(response)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up first, as a read-timeout fault makes it do

    def _write_stream(self, response: Response, req: Request) -> None:
        """A watch: chunked, one event a chunk, flushed at once; the bytes sent are counted as they go."""
        assert response.stream is not None
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for chunk in response.stream:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                req.response_bytes += len(chunk)
        except Cut:
            self.close_connection = True  # no final chunk: the client sees the connection break
            return
        self.wfile.write(b"0\r\n\r\n")

    def _write(self, response: Response) -> None:
        if response.delay:
            threading.Event().wait(response.delay)
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if response.cut_after is not None:
            self.wfile.write(response.body[: response.cut_after])
            self.wfile.flush()
            self.close_connection = True
            return
        if response.trickle:
            for start in range(0, len(response.body), TRICKLE_BYTES):
                self.wfile.write(response.body[start:start + TRICKLE_BYTES])
                self.wfile.flush()
                threading.Event().wait(response.trickle)
            return
        self.wfile.write(response.body)

    do_GET = do_POST = do_DELETE = do_PATCH = do_PUT = _serve
