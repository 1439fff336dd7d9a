"""Undo: one rule for everything we add because a node was down, our out-of-service taint and our NetworkFence.

Either comes off only for the machine it was added for, once that machine has been power-cycled since: a machine
that only got its network back may still hold mounts of a volume now used elsewhere (Rook's guidance: never lift
the taint before a full power cycle). What proves the power cycle is UNDO:

- bootid (the default): the kubelet reports another status.nodeInfo.bootID than the one recorded when we acted.
  Only the node itself can tell a reboot, and it says so in its own status: a node whose kubelet credential is
  stolen can claim one (docs/safety.md, Known limits).
- operator: that, and an operator's word, POWER_CYCLED_ANNOTATION on our own record of that outage (the taint
  record in RECOVERY_NAMESPACE, our NetworkFence), where no kubelet may write. It lives and dies with the record,
  so it vouches for that one outage and cannot be replayed for another.
- bmc (FENCING=redfish only): that, and the machine's BMC seen Off when we acted (recorded then, where the node
  cannot write) and On now. The planner sees the record; act asks the BMC, live, just before the write.
"""

from __future__ import annotations

from ..model import Node, boot_id_note
from ..settings import Settings

UNDO_BOOTID, UNDO_OPERATOR, UNDO_BMC = "bootid", "operator", "bmc"


def reboot_blocker(node: Node, recorded: str, what: str, *, settings: Settings, bmc_off_at: str = "",
                   acknowledged: bool = False, confirm: str = "") -> str | None:
    """Why the machine `node` stands for now is not proven power-cycled since `what` was added, when its bootID
    was `recorded` (as model.bounded.boot_id_note wrote it); None when UNDO's proof holds, but for UNDO=bmc's
    last witness (the BMC's On, now), which act asks just before the write. `acknowledged`: the operator's word
    is on our record of the outage; `confirm`: the command that puts it there."""
    if not recorded or not node.boot_id:
        return f"{what} stays: no bootID " + ("was recorded when it was added" if not recorded
                                              else "is reported by the node now") + \
            ", so a reboot since cannot be proven"
    if recorded in (node.boot_id, boot_id_note(node.boot_id)):  # recorded as written, or by its digest
        return f"{what} stays: the node came back without rebooting (bootID {recorded[:80]} is the one recorded " \
               "when rwo-failover added it), so it may still run what was released"
    if settings.undo == UNDO_OPERATOR and not acknowledged:
        return f"{what} stays until an operator confirms the machine was power-cycled (UNDO=operator): {confirm}"
    if settings.undo == UNDO_BMC and not bmc_off_at:
        return f"{what} stays: UNDO=bmc needs the BMC seen Off when it was added, and none was recorded"
    return None
