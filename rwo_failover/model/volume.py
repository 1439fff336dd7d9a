"""A PersistentVolume: its claim (by name and uid) and its access modes."""

from __future__ import annotations

from dataclasses import dataclass

from .claim import Claim
from .fields import Json, obj_at, text_at, texts_at
from .names import MULTI_ATTACH_MODES


@dataclass(frozen=True)
class Volume:
    """A PersistentVolume: which claim it is bound to (by name and uid), and its access modes."""

    name: str
    claim: str  # "namespace/name" from spec.claimRef, "" when unbound
    claim_uid: str
    access_modes: frozenset[str]

    @property
    def exclusive(self) -> bool:
        """A second node cannot attach it: the attach-detach controller's Multi-Attach rule."""
        return not self.access_modes & MULTI_ATTACH_MODES

    def bound_to(self, claim: Claim) -> bool:
        """Both directions agree: the claim is Bound and names this PV, and this PV names the claim and its uid."""
        return (claim.bound and claim.volume == self.name and self.claim == claim.key
                and bool(self.claim_uid) and self.claim_uid == claim.uid)

    @classmethod
    def from_json(cls, obj: Json) -> Volume:
        spec = obj_at(obj, "spec")
        ref = obj_at(spec, "claimRef")
        claim = f"{text_at(ref, 'namespace')}/{text_at(ref, 'name')}" if text_at(ref, "name") else ""
        return cls(text_at(obj_at(obj, "metadata"), "name"), claim, text_at(ref, "uid"),
                   frozenset(texts_at(spec, "accessModes")))
