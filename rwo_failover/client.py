"""The Kubernetes API, as this tool uses it: raw JSON, bounded retries, one pass deadline.

Calls go through the official client's ApiClient (kubeconfig or in-cluster
auth, TLS, the urllib3 pool) with `param_serialize` and `call_api`, and parse
the JSON body themselves. That skips the generated API classes: their import
builds a pydantic validator for every method (~0.9 s), each call validates its
arguments (~1.4 ms), and default deserialization of a 5,000-node list takes
seconds and hundreds of MB (see bench/). Every call goes through `Api.call`,
the one place that retries: on 429 (honouring Retry-After), 5xx, connection
errors and truncated bodies, for at most API_MAX_ATTEMPTS attempts and never
past the pass deadline.

Watches (continuous mode, watch.py) use the client's own `kubernetes.watch.Watch` over the same transport:
it is handed a function that opens the stream through `Api.call` (so opening is retried and deadline-bound
like any read) and returns the raw urllib3 response, which Watch splits into lines and parses with
`json.loads`. Given no model type, Watch never builds model objects (see `watch_events`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from datetime import datetime
from typing import Any, Callable, Iterator, Optional, TypeVar

import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from . import __version__
from .clock import ServerClock
from .config import ConfigError, Settings
from .model import BadObject, parse_time

log = logging.getLogger("rwo_failover")
LEASE_NAMESPACE = "kube-node-lease"
NETWORK_FENCES = "/apis/csiaddons.openshift.io/v1alpha1/networkfences"
ELECTION_LEASES = "leases (leader election)"  # named apart: their RBAC is another Role, in another namespace
RECOVERY_RECORDS = "configmaps (recovery records)"  # a Role in RECOVERY_NAMESPACE only, where tenants cannot write
USER_AGENT = f"rwo-failover/{__version__}"
MAX_RETRY_AFTER_SECONDS = 30.0
# PVCs and VolumeAttachments are ~1 KB against ~9 KB for a node or ~5 KB for a pod, so their pages can be
# ten times longer for the same memory per page, and a big cluster's lists take ten times fewer requests.
SMALL_OBJECT_PAGE_FACTOR = 10
MAX_LIST_RESTARTS = 3
T = TypeVar("T")


class ApiError(Exception):
    """A call that did not succeed; `transient` ones were retried until the bound."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class Forbidden(ApiError):
    """RBAC denied a verb; the message names it."""


class WriteStopped(ApiError):
    """A write attempt not sent because the write guard named a reason (a stop signal, lost leadership).

    `unanswered` is True when an earlier attempt of the same call was sent and got no answer: it may have
    landed."""

    def __init__(self, reason: str, attempts: int, unanswered: bool) -> None:
        super().__init__(reason)
        self.attempts, self.unanswered = attempts, unanswered


class OddAnswer(ValueError):
    """A complete JSON answer that is not an object (a proxy's, a broken server's): no API call answers with
    one, so it is judged like a body that cannot be parsed, and retried."""


# What leaves an attempt without a usable answer: a reset, a timeout, a body cut short or of another shape.
NO_ANSWER = (urllib3.exceptions.HTTPError, json.JSONDecodeError, ConnectionError, OddAnswer)


class Unavailable(ApiError):
    """The API server did not answer usefully within the attempts or the deadline.

    `answered` is False when no status came back at all (a reset, a timeout, a cut body): for a
    write, that means it may have landed.
    """

    def __init__(self, message: str, status: int = 0, answered: bool = True) -> None:
        super().__init__(message, status)
        self.answered = answered


def load_api_client(settings: Settings) -> k8s.ApiClient:
    """Kubeconfig when one is given or present, else in-cluster config; ConfigError when neither works."""
    cfg = k8s.Configuration()
    path = settings.kubeconfig or os.path.expanduser("~/.kube/config")
    in_cluster = "KUBERNETES_SERVICE_HOST" in os.environ and not settings.kubeconfig
    try:
        if in_cluster and not os.path.exists(path):
            k8s_config.load_incluster_config(client_configuration=cfg)
        else:
            _check_readable(path, settings.kubeconfig is not None)
            k8s_config.load_kube_config(config_file=path, context=settings.kube_context,
                                        client_configuration=cfg, persist_config=False)
    except (ConfigException, OSError, ValueError, TypeError, yaml.YAMLError) as err:
        raise ConfigError(f"cannot load cluster credentials: {err}") from None
    cfg.retries = False  # tenacity owns every retry, so attempts are bounded and logged in one place
    api_client = k8s.ApiClient(cfg)
    api_client.user_agent = USER_AGENT  # so audit logs (and our RBAC test) can tell our calls apart
    return api_client


def _check_readable(path_list: str, given: bool) -> None:
    source = "KUBECONFIG" if given else "default kubeconfig"
    for path in path_list.split(os.pathsep):
        if not os.path.exists(path):
            raise ConfigError(f"{source} {path!r} does not exist (and this is not running in a pod)")
        if not os.access(path, os.R_OK):
            raise ConfigError(f"{source} {path!r} is not readable")


def _retry_after(err: BaseException) -> Optional[float]:
    headers = getattr(err, "headers", None) or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def parse_version(git_version: str) -> Optional[tuple[int, int]]:
    """'v1.29.3-eks-abc' -> (1, 29); None when it does not start with major.minor."""
    found = re.match(r"v?(\d+)\.(\d+)", git_version.strip())
    return (int(found[1]), int(found[2])) if found else None


def is_transient(err: BaseException) -> bool:
    if isinstance(err, ApiException):
        return err.status == 429 or 500 <= (err.status or 0) <= 599
    return isinstance(err, NO_ANSWER)


def describe(err: BaseException) -> str:
    if isinstance(err, ApiException):
        return f"HTTP {err.status} {err.reason or ''}".strip()
    return f"{type(err).__name__}: {err}"


def _message(err: ApiException) -> str:
    try:
        return json.loads(err.body or "{}").get("message") or describe(err)
    except (ValueError, AttributeError):
        return describe(err)


def _page(body: Any, what: str) -> tuple[list, Optional[str], str]:
    """A list page's items, continue token and resourceVersion; a page of another shape (a proxy's, say) is
    a failed read."""
    meta = body.get("metadata") if isinstance(body, dict) else None
    items = body.get("items") if isinstance(body, dict) else None
    token = meta.get("continue") if isinstance(meta, dict) else None
    version = meta.get("resourceVersion") if isinstance(meta, dict) else None
    if not isinstance(body, dict) or not isinstance(items, (list, type(None))) or \
            not isinstance(meta, (dict, type(None))) or not isinstance(token, (str, type(None))) or \
            not isinstance(version, (str, type(None))):
        raise ApiError(f"list {what}: the answer is not a list of the expected shape")
    return items or [], token, version or ""


class Api:
    """The calls a pass makes, each retried within bounds and charged to one deadline."""

    def __init__(self, api_client: k8s.ApiClient, settings: Settings,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 on_attempt: Optional[Callable[[str, str, str], None]] = None,
                 server_clock: Optional[ServerClock] = None) -> None:
        self.api_client = api_client
        self.on_attempt = on_attempt  # (verb, what, status code or "error"): for the metrics
        self.settings = settings
        self.clock, self.sleep = clock, sleep
        # Fed by every response's Date header. Continuous mode shares one across passes, so a pass that reads
        # only its watch cache still judges ages on the server's clock (fed by the watch's own requests).
        self.server_clock = server_clock or ServerClock(monotonic=clock)
        self.listed_version = ""  # the resourceVersion of the last list completed: where a watch starts
        self.deadline = clock() + settings.pass_timeout_seconds
        self.attempts = 0  # every HTTP attempt, retries included, for the summary
        # Asked before every attempt of a write (retries included): a reason to send nothing more. The Writer
        # sets it; reads are never stopped, since a read changes nothing.
        self.write_guard: Optional[Callable[[], Optional[str]]] = None
        # Asked before every retry of a destructive write (the Actor sets it around one): the world may have
        # moved while the last attempt went unanswered, so the node is judged again, live, before each resend.
        self.retry_guard: Optional[Callable[[], Optional[str]]] = None
        # The current call: attempts sent, and whether one of them got no answer at all (so a write may have
        # landed although a later attempt says 404 or 409).
        self.call_attempts, self.call_unanswered = 0, False
        self._backoff = wait_exponential_jitter(multiplier=0.2, max=5.0, jitter=0.2)

    def remaining(self) -> float:
        return self.deadline - self.clock()

    def _wait(self, state: RetryCallState) -> float:
        err = state.outcome.exception() if state.outcome else None
        hinted = _retry_after(err) if err else None
        if hinted is not None:
            return min(hinted, MAX_RETRY_AFTER_SECONDS)
        return self._backoff(state)

    def _past_deadline(self, state: RetryCallState) -> bool:
        return self.clock() + state.upcoming_sleep >= self.deadline

    def _log_retry(self, verb: str, what: str) -> Callable[[RetryCallState], None]:
        def before_sleep(state: RetryCallState) -> None:
            err = state.outcome.exception() if state.outcome else None
            log.warning("retrying API call", extra={"verb": verb, "resource": what, "attempt": state.attempt_number,
                                                    "error": describe(err) if err else "",
                                                    "sleep_seconds": round(state.upcoming_sleep, 3)})
        return before_sleep

    def call(self, verb: str, what: str, method: str, path: str, query: Optional[list] = None,
             body: Optional[dict] = None, content_type: str = "application/json", stream: bool = False) -> Any:
        """One API call, retried within bounds; its parsed JSON body, or None for 404.

        `verb` and `what` name the RBAC verb and resource: they go in every error message. With `stream`, the
        answer is the open urllib3 response (status checked, body unread), for a watch.
        """
        self.call_attempts, self.call_unanswered = 0, False
        retrying = Retrying(
            stop=stop_after_attempt(self.settings.api_max_attempts) | self._past_deadline,
            wait=self._wait, retry=retry_if_exception(is_transient), sleep=self.sleep,
            before_sleep=self._log_retry(verb, what), reraise=True)
        try:
            return retrying(self._attempt, verb, what, method, path, query or [], body, content_type, stream)
        except ApiException as err:
            if err.status == 404:
                return None
            if err.status == 403:
                raise Forbidden(f"RBAC denies verb {verb!r} on {what}: {_message(err)}", 403) from None
            if is_transient(err):
                raise Unavailable(f"{verb} {what}: {describe(err)} after {self._bound(retrying)}", err.status) from None
            raise ApiError(f"{verb} {what}: {_message(err)}", err.status or 0) from None
        except NO_ANSWER as err:
            raise Unavailable(f"{verb} {what}: {describe(err)} after {self._bound(retrying)}",
                              answered=False) from None

    def _write_stopped(self) -> Optional[str]:
        return self.write_guard() if self.write_guard else None

    def _retry_stopped(self) -> Optional[str]:
        """The retry guard's reason not to resend; its own reads are calls too, so this call's state is kept."""
        if not self.call_attempts or self.retry_guard is None:
            return None
        state, guard = (self.call_attempts, self.call_unanswered), self.retry_guard
        self.retry_guard = None  # the guard's reads are GETs; never let it ask itself again
        try:
            return guard()
        finally:
            self.call_attempts, self.call_unanswered = state
            self.retry_guard = guard

    def _bound(self, retrying: Retrying) -> str:
        """Which bound ended the retries: the attempt count, or the pass deadline."""
        made = retrying.statistics.get("attempt_number", 1)
        if made < self.settings.api_max_attempts:
            return (f"{made} attempt(s); the next would pass the deadline "
                    f"(PASS_TIMEOUT_SECONDS={self.settings.pass_timeout_seconds:g})")
        return f"{made} attempt(s) (API_MAX_ATTEMPTS)"

    def _attempt(self, verb: str, what: str, method: str, path: str, query: list, body: Optional[dict],
                 content_type: str, stream: bool = False) -> Any:
        if method != "GET":
            # Asked again after the retry guard: its live re-check reads take time, in which a stop signal,
            # a lost leadership or the deadline may come.
            reason = self._write_stopped() or self._retry_stopped() or self._write_stopped()
            if reason:
                raise WriteStopped(reason, self.call_attempts, self.call_unanswered)
        self.attempts += 1
        self.call_attempts += 1
        code = "error"
        try:
            result, code = self._send(method, path, query, body, content_type, stream)
            return result
        except ApiException as err:
            code = str(err.status)
            raise
        except NO_ANSWER:
            self.call_unanswered = True
            raise
        finally:
            if self.on_attempt:
                self.on_attempt(verb, what, code)

    def _send(self, method: str, path: str, query: list, body: Optional[dict], content_type: str,
              stream: bool = False) -> tuple[Any, str]:
        timeout = max(0.05, min(self.settings.request_timeout_seconds, self.remaining()))
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        request = self.api_client.param_serialize(method=method, resource_path=path, query_params=query,
                                                  header_params=headers, body=body, auth_settings=["BearerToken"])
        # A watch's reads wait for the next event or bookmark: WATCH_STALE_SECONDS, not a request's timeout.
        read = self.settings.watch_stale_seconds if stream else timeout
        response = self.api_client.call_api(*request, _request_timeout=(timeout, read))
        self.server_clock.observe(response.getheader("Date"))
        if stream and 200 <= response.status <= 299:
            return response.response, str(response.status)
        try:
            data = response.read()  # reading the body can fail mid-way, so it stays inside the attempt
        finally:
            response.response.release_conn()
        if not 200 <= response.status <= 299:
            raise ApiException.from_response(http_resp=response, body=data.decode("utf-8", "replace"), data=None)
        try:
            found = json.loads(data) if data else {}
        except RecursionError:  # nested deeper than Python's parser goes: no retry will change that
            raise ApiException(status=0, reason="the response is nested too deeply to parse") from None
        if not isinstance(found, dict):
            raise OddAnswer(f"HTTP {response.status}, but the answer is JSON {type(found).__name__}, not an object")
        return found, str(response.status)

    def list_all(self, what: str, path: str, convert: Callable[[dict], T], page_factor: int = 1,
                 query: Optional[list] = None, consistent: bool = False) -> list[T]:
        """Every item of a paginated list, each converted as its page arrives (so only slim objects are kept).

        When a continue token expires (410) the list restarts, at most MAX_LIST_RESTARTS times, and what the
        failed attempt had gathered is discarded: a restarted list never holds an object twice. The first
        page's resourceVersion (the list's snapshot) is left in `listed_version`. `consistent` reads the
        latest state (no resourceVersion) instead of whatever the API server's watch cache holds ("0").
        """
        for restart in range(MAX_LIST_RESTARTS + 1):
            items: list[T] = []
            try:
                pages = self._pages(what, path, self.settings.page_size * page_factor, query or [], consistent)
                for page in pages:
                    items.extend(convert(obj) for obj in page)
                return items
            except ApiError as err:
                if err.status != 410 or restart == MAX_LIST_RESTARTS:
                    raise
                log.warning("list continue token expired; restarting the list", extra={"resource": what})
        raise AssertionError("unreachable")

    def _pages(self, what: str, path: str, limit: int, query: list, consistent: bool = False) -> Iterator[list[dict]]:
        token = None
        while True:
            # resourceVersion=0 lets the API server answer the first page from its watch cache instead of
            # etcd; a slightly stale list is fine because every node is re-read live before we act.
            position = [("continue", token)] if token else [] if consistent else [("resourceVersion", "0")]
            body = self.call("list", what, "GET", path, query + [("limit", limit)] + position)
            if body is None:
                return
            first = not token
            items, token, version = _page(body, what)
            if first:  # the list's snapshot: where a watch of it starts
                self.listed_version = version
            yield items
            if not token:
                return

    def watch(self, what: str, path: str, version: str, timeout_seconds: int, watcher: k8s_watch.Watch,
              query: Optional[list] = None) -> Iterator[dict]:
        """The events of one watch from `version`, with bookmarks, until the server ends it after
        `timeout_seconds`: dicts with "type" and "raw_object". An ERROR event raises ApiException (410 when
        the version is too old); a broken or silent stream raises urllib3's errors. Only opening is retried.

        kubernetes.watch.Watch does the streaming. It is given no model type (the opener has no return
        annotation or docstring), so it parses each line with json.loads and builds no model objects; and
        `timeout_seconds` turns off its own resume-after-410, so a 410 reaches the caller, which relists.
        `watcher.stop()`, from another thread, ends the stream at once.
        """
        def opener(**kwargs: Any):  # noqa: ANN202 - no annotation on purpose: Watch reads it as the model type
            params = list(query or []) + [("watch", "1"), ("allowWatchBookmarks", "true"),
                                          ("resourceVersion", kwargs["resource_version"]),
                                          ("timeoutSeconds", kwargs["timeout_seconds"])]
            response = self.call("watch", what, "GET", path, params, stream=True)
            if response is None:
                raise ApiError(f"watch {what}: not found (is its API installed?)", 404)
            # Kept on the watcher, so another thread can cut a read that waits for the next event; a watch
            # cancelled while it was opening is cut at once (watch.Reflector._interrupt).
            watcher.response = response  # type: ignore[attr-defined]
            if getattr(watcher, "cancelled", False):
                response.release_conn()
                raise urllib3.exceptions.ProtocolError("the watch was cancelled while it opened")
            return response
        return watcher.stream(opener, resource_version=version, timeout_seconds=timeout_seconds)

    # The calls a pass makes. Each names its RBAC verb and resource, which tests/test_rbac.py checks.
    def list_nodes(self, convert: Callable[[dict], T], consistent: bool = False) -> list[T]:
        return self.list_all("nodes", "/api/v1/nodes", convert, consistent=consistent)

    def watch_nodes(self, version: str, timeout_seconds: int, watcher: k8s_watch.Watch) -> Iterator[dict]:
        return self.watch("nodes", "/api/v1/nodes", version, timeout_seconds, watcher)

    def read_node(self, name: str) -> Optional[dict]:
        return self.call("get", "nodes", "GET", f"/api/v1/nodes/{name}")

    def read_lease(self, node: str) -> Optional[dict]:
        return self.call("get", f"leases in {LEASE_NAMESPACE}", "GET",
                         f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{node}")

    def list_pods_on(self, node: str, convert: Callable[[dict], T]) -> list[T]:
        return self.list_all("pods", "/api/v1/pods", convert, query=[("fieldSelector", f"spec.nodeName={node}")])

    def read_claim(self, namespace: str, name: str) -> Optional[dict]:
        return self.call("get", "persistentvolumeclaims", "GET",
                         f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}")

    def list_claims(self, convert: Callable[[dict], T]) -> list[T]:
        return self.list_all("persistentvolumeclaims", "/api/v1/persistentvolumeclaims", convert,
                             page_factor=SMALL_OBJECT_PAGE_FACTOR)

    def list_pods_in(self, namespace: str, convert: Callable[[dict], T]) -> list[T]:
        return self.list_all("pods", f"/api/v1/namespaces/{namespace}/pods", convert)

    def read_pod(self, namespace: str, name: str) -> Optional[dict]:
        return self.call("get", "pods", "GET", f"/api/v1/namespaces/{namespace}/pods/{name}")

    def read_volume(self, name: str) -> Optional[dict]:
        return self.call("get", "persistentvolumes", "GET", f"/api/v1/persistentvolumes/{name}")

    def list_volumes(self, convert: Callable[[dict], T]) -> list[T]:
        return self.list_all("persistentvolumes", "/api/v1/persistentvolumes", convert,
                             page_factor=SMALL_OBJECT_PAGE_FACTOR)

    def list_attachments(self, convert: Callable[[dict], T]) -> list[T]:
        return self.list_all("volumeattachments", "/apis/storage.k8s.io/v1/volumeattachments", convert,
                             page_factor=SMALL_OBJECT_PAGE_FACTOR)

    def delete_pod(self, namespace: str, name: str, uid: str) -> Optional[dict]:
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
        return self.call("delete", "pods", "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}",
                         [("gracePeriodSeconds", 0)], body)

    def delete_attachment(self, name: str) -> Optional[dict]:
        return self.call("delete", "volumeattachments", "DELETE", f"/apis/storage.k8s.io/v1/volumeattachments/{name}")

    def patch_node(self, name: str, patch: dict) -> Optional[dict]:
        """A JSON merge patch; put metadata.resourceVersion in it to make it fail (409) on a stale read."""
        return self.call("patch", "nodes", "PATCH", f"/api/v1/nodes/{name}", body=patch,
                         content_type="application/merge-patch+json")

    def server_stamp(self) -> tuple[datetime, Optional[datetime]]:
        """The API server's own time, and the Date header of the same answer: a server-side dry-run create of an
        Event (stored nowhere; `create events` is already ours) comes back stamped by the server's clock, the
        clock that stamps every Lease and node status we judge."""
        event = {"metadata": {"generateName": "rwo-failover-clock-"}, "type": "Normal", "reason": "ClockCheck",
                 "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": "rwo-failover-clock-check"},
                 "message": "a dry run: stored nowhere", "source": {"component": "rwo-failover"}}
        found = self.call("create", "events", "POST", "/api/v1/namespaces/default/events", [("dryRun", "All")],
                          dict(event, apiVersion="v1", kind="Event"))
        meta = found.get("metadata") if isinstance(found, dict) else None
        try:
            stamp = parse_time(meta.get("creationTimestamp") if isinstance(meta, dict) else None)
        except BadObject:
            stamp = None
        if stamp is None:
            raise Unavailable("create events (a server-side dry run, to read the API server's own time): the "
                              "answer carries no creationTimestamp")
        return stamp, self.server_clock.last_date

    def server_version(self) -> Optional[tuple[int, int]]:
        """(major, minor) from /version, a non-resource URL every authenticated client may read."""
        found = self.call("get", "/version", "GET", "/version") or {}
        return parse_version(str(found.get("gitVersion", "")))

    # Fencing with FENCING=networkfence; RBAC in the optional deploy/components/networkfence.
    def list_networkfences(self, convert: Callable[[dict], T], consistent: bool = False) -> list[T]:
        return self.list_all("networkfences", NETWORK_FENCES, convert, consistent=consistent)

    def watch_networkfences(self, version: str, timeout_seconds: int, watcher: k8s_watch.Watch) -> Iterator[dict]:
        return self.watch("networkfences", NETWORK_FENCES, version, timeout_seconds, watcher)

    def read_networkfence(self, name: str) -> Optional[dict]:
        return self.call("get", "networkfences", "GET", f"{NETWORK_FENCES}/{name}")

    def create_networkfence(self, body: dict) -> Optional[dict]:
        return self.call("create", "networkfences", "POST", NETWORK_FENCES, body=body)

    def patch_networkfence(self, name: str, patch: dict) -> Optional[dict]:
        return self.call("patch", "networkfences", "PATCH", f"{NETWORK_FENCES}/{name}", body=patch,
                         content_type="application/merge-patch+json")

    def delete_networkfence(self, name: str, resource_version: str = "") -> Optional[dict]:
        """With `resource_version`, preconditioned on it: 409 when the fence changed since it was read."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"resourceVersion": resource_version}} \
            if resource_version else None
        return self.call("delete", "networkfences", "DELETE", f"{NETWORK_FENCES}/{name}", body=body)

    # Recovery records: ConfigMaps in RECOVERY_NAMESPACE (a Role there; tenants cannot write them).
    def list_recovery_records(self, namespace: str, label: str, convert: Callable[[dict], T],
                              consistent: bool = False) -> list[T]:
        return self.list_all(RECOVERY_RECORDS, f"/api/v1/namespaces/{namespace}/configmaps", convert,
                             page_factor=SMALL_OBJECT_PAGE_FACTOR, query=[("labelSelector", label)],
                             consistent=consistent)

    def watch_recovery_records(self, namespace: str, label: str, version: str, timeout_seconds: int,
                               watcher: k8s_watch.Watch) -> Iterator[dict]:
        return self.watch(RECOVERY_RECORDS, f"/api/v1/namespaces/{namespace}/configmaps", version, timeout_seconds,
                          watcher, [("labelSelector", label)])

    def create_recovery_record(self, namespace: str, body: dict) -> Optional[dict]:
        return self.call("create", RECOVERY_RECORDS, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body=body)

    def patch_recovery_record(self, namespace: str, name: str, patch: dict) -> Optional[dict]:
        return self.call("patch", RECOVERY_RECORDS, "PATCH", f"/api/v1/namespaces/{namespace}/configmaps/{name}",
                         body=patch, content_type="application/merge-patch+json")

    def delete_recovery_record(self, namespace: str, name: str) -> Optional[dict]:
        return self.call("delete", RECOVERY_RECORDS, "DELETE", f"/api/v1/namespaces/{namespace}/configmaps/{name}")

    # Leader election (continuous mode with LEADER_ELECTION=true); RBAC in deploy/ha, one namespace only.
    def read_namespaced_lease(self, namespace: str, name: str) -> Optional[dict]:
        return self.call("get", ELECTION_LEASES, "GET",
                         f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}")

    def create_namespaced_lease(self, namespace: str, body: dict) -> Optional[dict]:
        return self.call("create", ELECTION_LEASES, "POST",
                         f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", body=body)

    def update_namespaced_lease(self, namespace: str, name: str, body: dict) -> Optional[dict]:
        """A PUT carrying metadata.resourceVersion: 409 when someone else wrote since our read."""
        return self.call("update", ELECTION_LEASES, "PUT",
                         f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}", body=body)

    def read_event(self, namespace: str, name: str) -> Optional[dict]:
        return self.call("get", "events", "GET", f"/api/v1/namespaces/{namespace}/events/{name}")

    def patch_event(self, namespace: str, name: str, patch: dict) -> Optional[dict]:
        return self.call("patch", "events", "PATCH", f"/api/v1/namespaces/{namespace}/events/{name}", body=patch,
                         content_type="application/merge-patch+json")

    def create_event(self, namespace: str, event: dict) -> Optional[dict]:
        return self.call("create", "events", "POST", f"/api/v1/namespaces/{namespace}/events",
                         body=dict(event, apiVersion="v1", kind="Event"))
