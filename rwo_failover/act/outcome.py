"""What a pass did, counted as it happens: the writer records every write, act its decisions."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Outcome:
    pods_deleted: list[str] = field(default_factory=list)
    pods_gone: list[str] = field(default_factory=list)
    pods_replaced: list[str] = field(default_factory=list)
    attachments_deleted: list[str] = field(default_factory=list)
    attachments_gone: list[str] = field(default_factory=list)
    attachments_held: list[str] = field(default_factory=list)
    attachments_replaced: list[str] = field(default_factory=list)  # made again under its name since it was judged
    nodes_not_down_on_recheck: list[str] = field(default_factory=list)
    split_brain: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    forbidden: list[str] = field(default_factory=list)
    not_attempted: list[str] = field(default_factory=list)  # writes refused because the pass deadline had passed
    unconfirmed: list[str] = field(default_factory=list)  # writes sent whose answer never came: they may have landed
    fenced: list[str] = field(default_factory=list)
    powered_off: list[str] = field(default_factory=list)  # FENCING=redfish: ForceOff accepted by the BMC
    fencing_pending: list[str] = field(default_factory=list)
    unfenced: list[str] = field(default_factory=list)
    taints_added: list[str] = field(default_factory=list)
    taints_removed: list[str] = field(default_factory=list)
    events: int = 0

    @property
    def changed(self) -> bool:
        """Whether a write of this pass landed that frees or fences something (what a later pass's "nothing was
        changed" must not hide): a pod or attachment deleted, our taint added or removed, a fence lifted, a machine
        powered off. Only what landed counts: `fenced` also names what a dry run would have fenced, and a BMC
        that answered Off by itself."""
        return bool(self.pods_deleted or self.attachments_deleted or self.taints_added or self.taints_removed
                    or self.unfenced or self.powered_off)
