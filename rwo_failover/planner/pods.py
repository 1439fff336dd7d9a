"""Pod selection: which pods on a proven-down node are stuck, eligible, and hold an RWO claim."""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

from ..config import Settings
from ..model import Claim, Pod
from .types import Skip


def stuck_states(pod: Pod) -> list[str]:
    states = []
    if pod.deleting:
        states.append("Terminating")
    if pod.phase == "Unknown":
        states.append("Unknown")
    if pod.reason == "NodeLost":
        states.append("NodeLost")
    if pod.ready in ("False", "Unknown"):
        states.append("NotReady")
    return states


def pod_exclusion(pod: Pod, settings: Settings) -> Optional[str]:
    """Why a pod on a down node is never touched, judged without its claims; None when eligible."""
    if pod.mirror:
        return "mirror/static pod"
    if pod.controller_kind == "DaemonSet":
        return "DaemonSet pod"
    if pod.namespace in settings.exclude_namespaces:
        return "namespace is in EXCLUDE_NAMESPACES"
    if settings.include_namespaces and pod.namespace not in settings.include_namespaces:
        return "namespace is not in INCLUDE_NAMESPACES"
    if settings.pod_selector and not settings.pod_selector.matches(pod.labels):
        return f"labels do not match POD_SELECTOR={settings.pod_selector.text!r}"
    if pod.opted_out:
        return "pod is annotated rwo-failover.io/opt-out"
    if not set(stuck_states(pod)) & settings.stuck_pod_states:
        return f"not stuck (phase={pod.phase}, ready={pod.ready}, not terminating)"
    return None


def claims_of(pod: Pod, claims: Mapping[str, Claim]) -> list[Claim]:
    """The pod's claims that were read (a claim that could not be read is simply absent)."""
    return [c for c in (claims.get(f"{pod.namespace}/{name}") for name in pod.claims) if c is not None]


def opted_out_claim(pod: Pod, claims: Mapping[str, Claim]) -> Optional[Claim]:
    return next((c for c in claims_of(pod, claims) if c.opted_out), None)


def _rwo_claims(pod: Pod, claims: Mapping[str, Claim]) -> tuple[list[Claim], Optional[str]]:
    opted = opted_out_claim(pod, claims)
    if opted is not None:
        return [], f"PVC {opted.key} is annotated rwo-failover.io/opt-out"
    found = [c for c in claims_of(pod, claims) if c.rwo]
    return found, None if found else "mounts no ReadWriteOnce/ReadWriteOncePod PVC"


def select_pods(pods: Sequence[Pod], claims: Mapping[str, Claim],
                settings: Settings) -> tuple[list[tuple[Pod, list[Claim]]], list[Skip]]:
    """The pods to force-delete, each with its RWO claims; and a skip, with its reason, for every other pod."""
    selected, skips = [], []
    for pod in pods:
        reason = pod_exclusion(pod, settings)
        found: list[Claim] = []
        if reason is None:
            found, reason = _rwo_claims(pod, claims)
        if reason:
            skips.append(Skip("pod", pod.key, reason))
        else:
            selected.append((pod, found))
    return selected, skips
