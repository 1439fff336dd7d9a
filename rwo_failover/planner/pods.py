"""Pod selection: which pods on a proven-down node are stuck, eligible, and hold an exclusive volume."""

from __future__ import annotations

from collections.abc import Sequence

from ..model import Claim, Pod, Snapshot, Volume
from ..settings import Settings
from .types import Skip

Selected = list[tuple[Pod, list[Claim]]]


def stuck_states(pod: Pod) -> list[str]:
    """Every stuck state of a pod on a proven-down node (the only pods ever judged). NotStarted (Pending, no
    Ready condition) only counts when the pod holds an exclusive volume attached to its node; select_pods
    checks that.

    A pod's status is its kubelet's last word, and this kubelet is dead: a pod it last reported Running and
    Ready is NotReady in truth (its Ready condition is Unknown now). The node lifecycle controller marks pods
    NotReady only when a node *leaves* Ready=True, so a node whose kubelet posted Ready=False with its pods
    still Ready (a failed network plugin), then lost power, keeps them reading Ready for good (issue 25)."""
    states = []
    if pod.deleting:
        states.append("Terminating")
    if pod.phase == "Unknown":
        states.append("Unknown")
    if pod.reason == "NodeLost":
        states.append("NodeLost")
    never_started = pod.phase == "Pending" and pod.ready is None
    if not never_started:  # whatever readiness it last reported, or none: nobody vouches for it now
        states.append("NotReady")
    else:
        states.append("NotStarted")
    return states


def exempt(pod: Pod) -> str | None:
    """Pods that are never ours to judge, and that the out-of-service taint does not harm: Kubernetes
    itself leaves mirror pods to the kubelet and recreates DaemonSet pods on the node when it is back."""
    if pod.mirror:
        return "mirror/static pod"
    if pod.controller_kind == "DaemonSet":
        return "DaemonSet pod"
    return None


def completed(pod: Pod) -> bool:
    """Succeeded or Failed: nothing runs in it, and the API server deletes a terminated pod at once, so it never
    holds a name or blocks a replacement. Only its volume's attachment may still pin the volume to the node."""
    return pod.phase in ("Succeeded", "Failed")


def setting_protects(pod: Pod, settings: Settings) -> str | None:
    """The setting that keeps us from deleting this pod, judged without its claims; None when none does."""
    if pod.namespace in settings.exclude_namespaces:
        return "namespace is in EXCLUDE_NAMESPACES"
    if settings.include_namespaces and pod.namespace not in settings.include_namespaces:
        return "namespace is not in INCLUDE_NAMESPACES"
    if settings.pod_selector and not settings.pod_selector.matches(pod.labels):
        return f"labels do not match POD_SELECTOR={settings.pod_selector.text!r}"
    if pod.opted_out:
        return "pod is opted out (annotated rwo-failover.io/opt-out)"
    return None


# kube-apiserver sets metadata.uid on every object; one read without it was reshaped on its way (a proxy). A delete
# preconditioned on "" names no object (409 on every try), and without a uid it could not name the one judged.
NO_UID = "no metadata.uid, so its delete could not be preconditioned on the object judged"


def pod_exclusion(pod: Pod, settings: Settings, powered_off: bool = False) -> str | None:
    """Why a pod on a down node is never touched, judged without its claims; None when eligible. On a node to
    be freed only once its BMC reports it powered off (FENCING=redfish, before NotReady) nothing has marked
    its pods yet, and nothing in them runs once that is proven: every pod there counts as stuck."""
    reason = exempt(pod) or setting_protects(pod, settings)
    if reason:
        return reason
    if completed(pod):
        return (f"completed (phase={pod.phase}): nothing runs in it and it blocks no replacement; an exclusive "
                "volume's attachment it leaves is released as an orphan")
    if not powered_off and not set(stuck_states(pod)) & settings.stuck_pod_states:
        return f"not stuck (phase={pod.phase}, ready={pod.ready}, not terminating)"
    return None


def claims_of(pod: Pod, snapshot: Snapshot) -> list[Claim]:
    """The pod's claims that were read (a claim that could not be read is simply absent)."""
    return [c for c in (snapshot.claims.get(f"{pod.namespace}/{name}") for name in pod.claims) if c is not None]


def opted_out_claim(pod: Pod, snapshot: Snapshot) -> Claim | None:
    return next((c for c in claims_of(pod, snapshot) if c.opted_out), None)


def bound_volume(claim: Claim, snapshot: Snapshot) -> Volume | None:
    """The claim's PV, only when both name each other (uid included) and the claim is Bound: a claim may
    name any PV in spec.volumeName, so that alone proves nothing."""
    volume = snapshot.volumes.get(claim.volume)
    return volume if volume is not None and volume.bound_to(claim) else None


def exclusive_claims(pod: Pod, snapshot: Snapshot) -> tuple[list[Claim], str | None]:
    """The pod's claims bound to an exclusive PV; or why it has none."""
    opted = opted_out_claim(pod, snapshot)
    if opted is not None:
        return [], f"PVC {opted.key} is annotated rwo-failover.io/opt-out"
    found, unproven = [], []
    for claim in claims_of(pod, snapshot):
        volume = bound_volume(claim, snapshot)
        if volume is None:
            unproven.append(claim.key)
        elif volume.exclusive:
            found.append(claim)
    if found:
        return found, None
    why = ("mounts no exclusive volume: no PVC bound to a ReadWriteOnce/ReadWriteOncePod PV without "
           "ReadWriteMany or ReadOnlyMany")
    if unproven:
        why += f"; not Bound to a PV that names it back: {', '.join(unproven)}"
    return [], why


def protection(pod: Pod, snapshot: Snapshot, settings: Settings) -> str | None:
    """Why this pod must not be deleted by Kubernetes because of a taint we add: a setting (or an opt-out on
    the pod or any PVC it mounts) protects it, and it mounts a claim not provably shareable. RWX pods and pods
    without volumes are not protected by any setting. Mirror pods are exempt (they cannot mount claims). The
    namespace and selector settings do not cover DaemonSet pods, which live in kube-system on every node and are
    recreated there when it is back; an opt-out annotation is the user's word on that pod or claim, and covers
    them too, since the taint would have their volumes force-detached."""
    if pod.mirror or not pod.claims:
        return None
    daemon = pod.controller_kind == "DaemonSet"
    reason = ("pod is opted out (annotated rwo-failover.io/opt-out)" if pod.opted_out else None) if daemon \
        else setting_protects(pod, settings)
    opted = opted_out_claim(pod, snapshot)
    if reason is None and opted is not None:
        reason = f"PVC {opted.key} is annotated rwo-failover.io/opt-out"
    if reason is None:
        return None
    shareable = [c for c in claims_of(pod, snapshot)
                 if (v := bound_volume(c, snapshot)) is not None and not v.exclusive]
    return None if len(shareable) == len(pod.claims) else reason


def _attached_here(claims: Sequence[Claim], node: str, snapshot: Snapshot) -> bool:
    volumes = {c.volume for c in claims}
    return any(a.node == node and a.volume in volumes for a in snapshot.attachments)


def select_pods(pods: Sequence[Pod], snapshot: Snapshot, settings: Settings, *,
                powered_off: bool = False) -> tuple[Selected, list[Skip]]:
    """The pods to force-delete, each with its exclusive claims; and a skip, with its reason, for every other.
    `powered_off`: see pod_exclusion."""
    selected: Selected = []
    skips = []
    for pod in pods:
        reason = pod_exclusion(pod, settings, powered_off)
        if reason is None and not pod.uid:
            reason = NO_UID
        found: list[Claim] = []
        if reason is None:
            found, reason = exclusive_claims(pod, snapshot)
        if reason is None and not powered_off and set(stuck_states(pod)) & settings.stuck_pod_states == {"NotStarted"} \
                and not _attached_here(found, pod.node, snapshot):
            reason = "never started, and none of its exclusive volumes is attached to this node"
        if reason:
            skips.append(Skip("pod", pod.key, reason))
        else:
            selected.append((pod, found))
    return selected, skips
