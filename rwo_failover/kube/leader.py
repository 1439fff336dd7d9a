"""Leader election on a coordination.k8s.io Lease, for two or more continuous-mode replicas.

Only the leader runs passes. The rules are client-go's (tools/leaderelection): a candidate takes the Lease
when it is missing, released (no holder), or unchanged for a whole lease duration *as timed by the
candidate's own monotonic clock* since it last saw it change. So no two clocks are ever compared. On stop,
the leader releases the Lease (empty holder), so a standby takes over at once instead of after a lease.
Every write is preconditioned on the resourceVersion read, so two candidates never both win one round.

A leader stops writing before a standby can lead (`write_guard`, which the pass's Writer asks before every
attempt): a renewal sent at T keeps the Lease ours until T + the lease duration by any standby's reckoning,
since a standby times a whole duration from when it sees the renewal, which is later than T. A write may
start only while that leaves room for it to land (`write_margin`: the request timeout and a second).

Why not `kubernetes.leaderelection` from the client: its loop blocks forever with no way to stop it or to
release the Lease on SIGTERM, its LeaseLock uses the client's global default configuration rather than
ours (kubeconfig, retries, deadline, User-Agent), and it stamps the Lease with naive local times.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..model import BadObject, Json, int_at, obj_at, text_at
from .api import Api
from .errors import ApiError

log = logging.getLogger(__name__)


class LeaderElector:
    def __init__(self, new_api: Callable[[], Api], namespace: str, name: str, *, identity: str, lease_seconds: int,
                 monotonic: Callable[[], float] = time.monotonic, write_margin: float = 0.0) -> None:
        self.new_api, self.namespace, self.name = new_api, namespace, name
        self.identity, self.lease_seconds, self.monotonic = identity, lease_seconds, monotonic
        self.write_margin = write_margin
        self.retry_seconds = max(1.0, lease_seconds / 15)
        # The leader keeps leading while its last renewal is younger than this; a standby waits a whole lease.
        self.renew_deadline = lease_seconds * 2 / 3
        self._observed: tuple[str, str, int, str] | None = None
        self._observed_at = 0.0
        self._renewed_at: float | None = None  # when our last successful renewal was *sent*
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._round_at: float | None = None  # when a round last reached the API server and got an answer
        self.turned_at: float | None = None  # when a round last ended, answered or not: the loop turns

    @property
    def last_round_ok(self) -> bool:
        """A round answered within the last lease duration: the election loop itself is healthy."""
        return self._round_at is not None and self.monotonic() - self._round_at < self.lease_seconds

    def unanswered(self) -> str | None:
        """Why this replica is not ready: no round has reached the API server within the lease."""
        if self.last_round_ok:
            return None
        return (f"leader election: the API server has not answered a round within the lease "
                f"({self.lease_seconds}s)")

    @property
    def leading(self) -> bool:
        renewed = self._renewed_at
        return renewed is not None and self.monotonic() - renewed < self.renew_deadline

    def write_guard(self) -> str | None:
        """Why this replica may not start a write now; None while its Lease surely outlives the write."""
        renewed = self._renewed_at
        if renewed is None:
            return "this replica does not hold the leader Lease"
        left = renewed + self.lease_seconds - self.monotonic()
        if left <= self.write_margin:
            return (f"no longer surely the leader: its Lease, unrenewed, may lapse in {max(left, 0.0):.1f}s, "
                    f"less than a write may take ({self.write_margin:g}s), and a standby could then lead")
        return None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing, then release the Lease if we hold it, so a standby takes over at once."""
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=30)
        if self._renewed_at is not None:
            self.release()

    def _run(self) -> None:
        while not self._stop.is_set():
            was = self.leading
            try:
                self.step()
                self._round_at = self.monotonic()
            except ApiError as err:
                log.warning("leader election: cannot read or write the Lease", extra={"error": str(err)})
            except Exception:
                # (the replica would stand by for good, silently, until the liveness probe notices)
                log.exception("leader election: a round failed unexpectedly; retrying")
            self.turned_at = self.monotonic()  # liveness: the loop turns, whatever the API server says
            if self.leading != was:
                log.info("leader election: now leading" if self.leading else "leader election: lost the lead",
                         extra={"identity": self.identity, "lease": f"{self.namespace}/{self.name}"})
            self._stop.wait(self.retry_seconds)

    def step(self) -> bool:
        """One round: acquire or renew. True when we hold the Lease after it."""
        api = self.new_api()
        lease = api.read_namespaced_lease(self.namespace, self.name)
        now = api.server_clock.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        if lease is None:
            return self._write(api.create_namespaced_lease, None, self._spec(now, now, 0))
        seen = _Seen.read(lease, self.lease_seconds)
        record = (seen.holder, seen.renewed, seen.transitions, seen.acquired)
        if record != self._observed:
            self._observed, self._observed_at = record, self.monotonic()
        if seen.holder == self.identity:
            return self._write(api.update_namespaced_lease, seen, self._spec(seen.acquired or now, now,
                                                                            seen.transitions))
        if seen.holder and self.monotonic() - self._observed_at < seen.duration:
            self._renewed_at = None
            return False
        return self._write(api.update_namespaced_lease, seen, self._spec(now, now, seen.transitions + 1))

    def release(self) -> None:
        try:
            api = self.new_api()
            lease = api.read_namespaced_lease(self.namespace, self.name)
            seen = _Seen.read(lease, self.lease_seconds) if lease is not None else None
            if seen is not None and seen.holder == self.identity:
                now = api.server_clock.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
                released = dict(self._spec(now, now, seen.transitions), holderIdentity=None, leaseDurationSeconds=1)
                api.update_namespaced_lease(self.namespace, self.name, dict(seen.raw, spec=released))
                log.info("leader election: released the Lease", extra={"identity": self.identity})
        except ApiError as err:
            log.warning("leader election: could not release the Lease", extra={"error": str(err)})
        self._renewed_at = None

    def _spec(self, acquired: str, renewed: str, transitions: int) -> dict[str, Any]:
        return {"holderIdentity": self.identity, "leaseDurationSeconds": self.lease_seconds,
                "acquireTime": acquired, "renewTime": renewed, "leaseTransitions": transitions}

    def _write(self, call: Callable[..., dict[str, Any] | None], lease: _Seen | None, spec: Json) -> bool:
        body: dict[str, Any] = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace}, "spec": spec}
        if lease is not None:
            body["metadata"]["resourceVersion"] = lease.version
        sent = self.monotonic()  # a standby times our Lease from when it sees this write: later than now
        try:
            if lease is None:
                call(self.namespace, body)
            else:
                call(self.namespace, self.name, body)
        except ApiError as err:
            if err.status != 409:  # 409: another candidate wrote first; not ours this round
                raise
            return self.leading
        self._renewed_at = sent
        return True


@dataclass(frozen=True)
class _Seen:
    """The leader Lease as read: each field of the type it must have, or ApiError naming the one that is not (an
    answer read like any other, so a bad one is a failed round, never an exception out of the election)."""

    raw: dict[str, Any]
    holder: str
    renewed: str
    acquired: str
    transitions: int
    duration: int
    version: str

    @classmethod
    def read(cls, lease: dict[str, Any], default_seconds: int) -> _Seen:
        try:
            spec, version = obj_at(lease, "spec"), text_at(obj_at(lease, "metadata"), "resourceVersion")
            if not version:
                raise BadObject("metadata.resourceVersion is missing")
            return cls(lease, text_at(spec, "holderIdentity"), text_at(spec, "renewTime"),
                       text_at(spec, "acquireTime"), int_at(spec, "leaseTransitions", 0, high=2**31 - 1),
                       int_at(spec, "leaseDurationSeconds", default_seconds, low=1), version)
        except BadObject as err:
            raise ApiError(f"the leader Lease cannot be read: {err}") from None
