"""The out-of-service taint: when to add it, what blocks it, and when ours comes off."""

from __future__ import annotations

from datetime import datetime
from typing import Mapping, Optional, Sequence

from ..config import Settings
from ..model import Claim, Lease, Node, Pod, Snapshot
from .nodes import LEASE_FRESH_SECONDS, age
from .pods import opted_out_claim
from .types import NodeState, NodeVerdict, Skip

OUT_OF_SERVICE_SINCE = (1, 28)  # the out-of-service taint's force-detach is GA from Kubernetes 1.28


def wants_out_of_service(snapshot: Snapshot, settings: Settings) -> bool:
    if settings.out_of_service_taint == "auto":
        return snapshot.server_version is not None and snapshot.server_version >= OUT_OF_SERVICE_SINCE
    return settings.out_of_service_taint == "always"


def taint_blocker(pods: Sequence[Pod], claims: Mapping[str, Claim]) -> Optional[str]:
    """Why the out-of-service taint must not go on: Kubernetes would then force-delete an opted-out pod."""
    for pod in pods:
        if pod.opted_out or opted_out_claim(pod, claims) is not None:
            return f"out-of-service taint not added: {pod.key} is opted out, and the taint would let " \
                   "Kubernetes force-delete it"
    return None


def recovered(node: Node, lease: Optional[Lease], settings: Settings, now: datetime) -> bool:
    """Ready for RECOVERY_SECONDS with a fresh Lease: our out-of-service taint may come off."""
    return (node.ready == "True" and node.ready_since is not None
            and age(now, node.ready_since) >= settings.recovery_seconds
            and lease is not None and lease.renew_time is not None
            and age(now, lease.renew_time) < LEASE_FRESH_SECONDS)


def untaint(verdicts: Sequence[NodeVerdict], nodes: Mapping[str, Node], snapshot: Snapshot,
            settings: Settings) -> tuple[tuple[str, ...], list[Skip]]:
    """Recovering nodes whose out-of-service taint (ours) comes off now, and a skip for each that must wait."""
    ready, skips = [], []
    for verdict in (v for v in verdicts if v.state is NodeState.RECOVERING):
        if recovered(nodes[verdict.node], snapshot.leases.get(verdict.node), settings, snapshot.now):
            ready.append(verdict.node)
        else:
            skips.append(Skip("node", verdict.node, f"our out-of-service taint stays until Ready for "
                                                    f"RECOVERY_SECONDS={settings.recovery_seconds} with a fresh Lease"))
    return tuple(ready), skips
