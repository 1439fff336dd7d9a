"""Undo: one rule for everything we add because a node was down, our out-of-service taint and our NetworkFence.

Either comes off only for the machine it was added for, once that machine has been power-cycled since: a machine
that only got its network back may still hold mounts of a volume now used elsewhere (Rook's guidance: never lift
the taint before a full power cycle). What proves the power cycle is UNDO:

- bootid (the default): the kubelet reports another status.nodeInfo.bootID than the one recorded when we acted.
  Only the node itself can tell a reboot, and it says so in its own status: a node whose kubelet credential is
  stolen can claim one (docs/safety.md, Known limits).
- operator: that, and an operator's label REBOOT_ACK_LABEL on the Node whose value is that new bootID. The
  NodeRestriction admission plugin forbids a kubelet to set any node-restriction.kubernetes.io/ label on its own
  Node, so the accused cannot vouch for itself.
- bmc (FENCING=redfish only): that, and the machine's BMC seen Off when we acted (recorded then, where the node
  cannot write) and On now. The planner sees the record; act asks the BMC, live, just before the write.
"""

from __future__ import annotations

import hashlib
import re
from typing import Optional

from ..model import REBOOT_ACK_LABEL, Node, boot_id_note
from ..settings import Settings

UNDO_BOOTID, UNDO_OPERATOR, UNDO_BMC = "bootid", "operator", "bmc"
_LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)")


def ack_value(boot_id: str) -> str:
    """The REBOOT_ACK_LABEL value that vouches for this boot: the bootID as written when it is a label value (a
    kubelet's is a UUID), else `sha256-` and the start of its digest (63 characters at most)."""
    if _LABEL_VALUE.fullmatch(boot_id):
        return boot_id
    return "sha256-" + hashlib.sha256(boot_id.encode()).hexdigest()[:56]


def reboot_blocker(node: Node, recorded: str, what: str, settings: Settings, bmc_off_at: str = "") -> Optional[str]:
    """Why the machine `node` stands for now is not proven power-cycled since `what` was added, when its bootID
    was `recorded` (as model.bounded.boot_id_note wrote it); None when UNDO's proof holds, but for UNDO=bmc's
    last witness (the BMC's On, now), which act asks just before the write."""
    if not recorded or not node.boot_id:
        return f"{what} stays: no bootID " + ("was recorded when it was added" if not recorded
                                              else "is reported by the node now") + \
            ", so a reboot since cannot be proven"
    if recorded in (node.boot_id, boot_id_note(node.boot_id)):  # recorded as written, or by its digest
        return f"{what} stays: the node came back without rebooting (bootID {recorded[:80]} is the one recorded " \
               "when rwo-failover added it), so it may still run what was released"
    if settings.undo == UNDO_OPERATOR:
        want = ack_value(node.boot_id)
        if node.label(REBOOT_ACK_LABEL) != want:
            return f"{what} stays until an operator confirms the machine was power-cycled (UNDO=operator): " \
                   f"kubectl label node {node.name[:253]} {REBOOT_ACK_LABEL}={want} --overwrite"
    if settings.undo == UNDO_BMC and not bmc_off_at:
        return f"{what} stays: UNDO=bmc needs the BMC seen Off when it was added, and none was recorded"
    return None
