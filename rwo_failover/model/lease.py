"""A node's Lease in kube-node-lease: the kubelet's heartbeat, timed on the server's clock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .fields import Json, int_at, obj_at, server_time, text_at, time_at
from .names import DEFAULT_LEASE_SECONDS


@dataclass(frozen=True)
class Lease:
    node: str
    renew_time: datetime | None  # spec.renewTime: the kubelet's own clock, so it never times anything alone
    duration: int = DEFAULT_LEASE_SECONDS  # spec.leaseDurationSeconds: the kubelet renews well within it
    version: str = ""  # metadata.resourceVersion: another value later means it changed in between
    changed_at: datetime | None = None  # its last change (a renewal), on the server's clock (managedFields)

    @property
    def kubelet_skew(self) -> float | None:
        """How far the kubelet's clock runs ahead of the server's, measured on one write: the renewTime it
        wrote against the time the server stamped on that write. Up to a second high (the stamp is truncated)."""
        if self.renew_time is None or self.changed_at is None:
            return None
        return (self.renew_time - self.changed_at).total_seconds()

    @classmethod
    def from_json(cls, obj: Json) -> Lease:
        meta, spec = obj_at(obj, "metadata"), obj_at(obj, "spec")
        # At least 1 s, as the API server validates it: a duration of 0 or less would make a heartbeating
        # kubelet's Lease look stale.
        return cls(text_at(meta, "name"), time_at(spec, "renewTime"),
                   int_at(spec, "leaseDurationSeconds", DEFAULT_LEASE_SECONDS, low=1) or DEFAULT_LEASE_SECONDS,
                   text_at(meta, "resourceVersion"), server_time(meta))
