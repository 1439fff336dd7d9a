"""FENCING=redfish's proof, through the writer: a node is down once its BMC answers PowerState Off for the node's
own machine (the ComputerSystem whose UUID is the node's systemUUID), after a ForceOff when REDFISH_POWER_OFF
allows one. Anything else is no proof, and nothing on the node is touched (act/fencing.py decides that)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..kube import Api
from ..model import Node
from ..model.event_reasons import Reason
from ..planner.fencing import bmc_key
from ..settings import Bmc, BmcMapError, Settings, bmc_for
from . import redfish
from .events import EventRecorder
from .outcome import Outcome
from .writer import Result, Writer

log = logging.getLogger(__name__)
# A wait for an answer (a NetworkFence's, a BMC's Off after ForceOff) stops once only this share of the pass
# deadline is left for acting: fencing then costs seconds, never a CronJob interval.
KEEP_FOR_ACTING = 1 / 3


class PowerWitness:
    """Asks a node's BMC (REDFISH_BMC_FILE) whether the machine is off, and powers it off when allowed."""

    def __init__(self, api: Api, settings: Settings, writer: Writer, *, events: EventRecorder, outcome: Outcome,
                 sleep: Callable[[float], None]) -> None:
        self.api, self.settings, self.writer, self.events = api, settings, writer, events
        self.outcome, self.sleep = outcome, sleep

    def _entry(self, node: Node, judged: tuple[str, str, str] | None) -> tuple[Bmc | None, str]:
        """The node's BMC map entry, by the key the plan judged unique (`judged`: the key, the node's systemUUID
        then, and another node reporting that UUID), while the node as read now still carries both; else (None,
        why). An entry that names its machine by uuid proves nothing when another node reports that UUID too."""
        label, key = self.settings.redfish_node_label, bmc_key(node, self.settings)
        if not key:
            return None, f"the node has no label {label}, which keys REDFISH_BMC_FILE"
        if judged is not None and (key, node.system_uuid) != judged[:2]:
            return None, ("its REDFISH_BMC_FILE key or its systemUUID changed since the plan judged them unique "
                          "among the nodes; asked again next pass")
        try:
            bmc = bmc_for(str(self.settings.redfish_bmc_file), key)
        except BmcMapError as err:
            return None, f"REDFISH_BMC_FILE cannot be used for this node ({err})"
        if judged is not None and judged[2] and bmc.uuid:
            return None, (f"node {judged[2]} reports the same status.nodeInfo.systemUUID: a UUID two machines "
                          "report identifies neither, so the entry's uuid cannot be matched to this node (name "
                          "its machine by serial)")
        return bmc, ""

    def shows_on(self, node: Node) -> str | None:
        """UNDO=bmc's last witness, asked just before our taint comes off: None when the machine the map names for
        the node answers PowerState On now (it was seen Off when we acted: a power cycle the BMC itself showed);
        else why not. A read only: nothing is powered on or off."""
        bmc, why = self._entry(node, None)
        if bmc is None:
            return why
        state, _system, why = redfish.power_state(bmc, self.settings, self.api.remaining, node_uuid=node.system_uuid)
        if state is None:
            return f"its BMC does not show the machine back on ({why})"
        return None if state == "On" else f"its BMC answers PowerState {state}, not On"

    def prove_off(self, node: Node, judged: tuple[str, str, str], *, hold_power_off: bool = False) -> str | None:
        """None once the BMC answers Off (after ForceOff, with REDFISH_POWER_OFF) for the machine the map names;
        else why not ("" when the writer recorded it already, or when it is only pending: `hold_power_off`, this
        process has not yet watched the Lease long enough to send a ForceOff). No reason holds the BMC's address or
        credentials."""
        bmc, why = self._entry(node, judged)
        if bmc is None:
            return why
        state, system, why = redfish.power_state(bmc, self.settings, self.api.remaining, node_uuid=node.system_uuid)
        if state == "Off":
            return None
        if state is None:
            return why
        if not self.settings.redfish_power_off:  # first: no wait can make a power-off that is never sent
            return f"its BMC answers PowerState {state}, and REDFISH_POWER_OFF=false: it is not powered off"
        if hold_power_off:
            self.outcome.fencing_pending.append(node.name)
            log.info(f"its BMC answers PowerState {state}: not powered off until this process has itself seen its "
                     "Lease unchanged for a renewal interval", extra={"node": node.name})
            return ""
        result, why = self.writer.power_off(node.name, lambda: redfish.force_off(bmc, system, self.settings,
                                                                                  remaining=self.api.remaining))
        if result is Result.WOULD:
            return None
        if result is not Result.DONE:
            return why if result is Result.FAILED else ""
        self.outcome.powered_off.append(node.name)
        log.warning("powered off through its BMC (Redfish ForceOff): its Lease went silent and the BMC answered "
                    f"PowerState {state}", extra={"node": node.name})
        self.events.node(node.name, node.uid, "Warning", reason=Reason.NodePoweredOff,
                         message=f"powered off through its BMC (Redfish ForceOff): its Lease went silent and the BMC "
                         f"answered PowerState {state}")
        budget = min(self.settings.redfish_off_wait_seconds,
                     self.api.remaining() - self.settings.pass_timeout_seconds * KEEP_FOR_ACTING)
        off, why = redfish.await_off(bmc, self.settings, self.api.remaining, sleep=self.sleep, budget=budget,
                                     node_uuid=node.system_uuid)
        return None if off else why
