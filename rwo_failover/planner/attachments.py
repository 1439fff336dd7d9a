"""Which VolumeAttachments on a proven-down node to release: the selected pods' own, and orphans."""

from __future__ import annotations

from collections.abc import Sequence

from ..model import Attachment, Claim, Pod, Snapshot
from ..settings import Settings
from .pods import NO_UID, completed
from .types import AttachmentAction, Skip

Selected = Sequence[tuple[Pod, list[Claim]]]
# A deleted attachment stays, marked, until its CSI external-attacher has detached the volume (its finalizer,
# external-attacher/<driver>, holds it): deleting it again changes nothing, and counting it would make a slow
# attacher after one outage trip the nodes brake at the next.
BEING_DETACHED = ("being detached: deleted already (deletionTimestamp set), and held by its attacher's finalizer "
                  "until the volume is detached; nothing more to do here")


def _by_volume(selected: Selected) -> dict[str, tuple[Claim, list[str]]]:
    """Each PV the selected pods' claims are bound to: the claim, and the keys of the selected pods using it."""
    by_volume: dict[str, tuple[Claim, list[str]]] = {}
    for pod, claims in selected:
        for claim in claims:
            if claim.volume:
                by_volume.setdefault(claim.volume, (claim, []))[1].append(pod.key)
    return by_volume


def attachments_for(node: str, selected: Selected, pods: Sequence[Pod], *, snapshot: Snapshot,
                    settings: Settings) -> tuple[list[AttachmentAction], list[Skip]]:
    """The attachments on `node` to delete, and a skip for each one left with a reason."""
    by_volume = _by_volume(selected)
    chosen = {pod.key for pod, _ in selected}
    # A volume still used by a pod we are not deleting stays attached, or it would be yanked from under it. A
    # completed pod uses nothing: what it leaves attached is an orphan.
    kept_claims = {f"{p.namespace}/{c}" for p in pods if p.key not in chosen and not completed(p) for c in p.claims}
    used_claims = kept_claims | {c.key for _, claims in selected for c in claims}
    actions, skips = [], []
    action: AttachmentAction | None
    reason: str | None
    for att in sorted((a for a in snapshot.attachments if a.node == node), key=lambda a: a.name):
        if att.deleting:
            action, reason = None, BEING_DETACHED
        elif not att.uid:
            action, reason = None, NO_UID
        elif att.inline:
            action, reason = None, ("inline volume (CSI migration): no PersistentVolume traces it to a claim, "
                                    "so it is left alone; detach it by hand if it blocks a pod")
        elif att.volume not in by_volume:
            action, reason = _orphan(att, snapshot, settings, used_claims=used_claims)
        elif by_volume[att.volume][0].key in kept_claims:
            action, reason = None, f"PV {att.volume} is also used by a pod left in place"
        else:
            claim, pod_keys = by_volume[att.volume]
            action, reason = AttachmentAction(att.name, node, att.volume, claim.key, tuple(pod_keys), claim.uid,
                                              att.uid), None
        if action:
            actions.append(action)
        elif reason:
            skips.append(Skip("volumeattachment", att.name, reason))
    return actions, skips


def _orphan(att: Attachment, snapshot: Snapshot, settings: Settings, *,
            used_claims: set[str]) -> tuple[AttachmentAction | None, str | None]:
    """An attachment on a proven-down node whose RWO claim no pod on that node uses any more.

    It is what an earlier pass (or a human's force delete) leaves when the pod went but its
    attachment could not be deleted; with no pod to find it by, only this rule releases it.
    """
    volume = snapshot.volumes.get(att.volume)
    if volume is None or not volume.claim or volume.claim in used_claims:
        return None, None  # not ours to judge: no PV read, unbound, or a pod on the node still uses it
    claim = snapshot.claims.get(volume.claim)
    if claim is None or not volume.bound_to(claim) or not volume.exclusive:
        return None, None
    if claim.opted_out:
        return None, f"orphaned, but PVC {claim.key} is annotated rwo-failover.io/opt-out"
    if claim.namespace in settings.exclude_namespaces or (
            settings.include_namespaces and claim.namespace not in settings.include_namespaces):
        return None, f"orphaned, but PVC {claim.key} is in a namespace outside the filters"
    if settings.pod_selector:
        return None, "orphaned, but POD_SELECTOR is set and no pod is left to match it"
    return AttachmentAction(att.name, att.node, att.volume, claim.key, (), claim.uid, att.uid), None
