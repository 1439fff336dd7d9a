"""Values that switch a safety rule off: refused (exit 2) unless ALLOW_UNSAFE names the rule, and then named in
a start-up warning. One setting lists every acknowledgement, so one grep of a manifest shows all that is off,
and each rule is named, so acknowledging one never lets another through."""

from __future__ import annotations

from ..model.names import kubelet_may_set
from .errors import ConfigError
from .table import Settings

UNSAFE_FRACTION = 0.9  # MAX_UNHEALTHY_FRACTION from here on needs ALLOW_UNSAFE=unhealthy-fraction


def switched_off(settings: Settings) -> list[tuple[str, str]]:
    """(rule, what the value disables) for each safety rule these settings switch off, acknowledged or not."""
    found = []
    if settings.max_unhealthy_fraction >= UNSAFE_FRACTION:
        # Not only 1: at 0.9 a pass of a 10-node cluster acts with 9 nodes not Ready, and at 0.95 the brake of
        # any cluster of up to 20 nodes never trips while one node is Ready.
        found.append(("unhealthy-fraction", f"MAX_UNHEALTHY_FRACTION={settings.max_unhealthy_fraction:g}: the "
                                            "partition brake all but never trips (at 0.9, a 10-node cluster acts "
                                            "with 9 nodes not Ready; at 1, never)"))
    if settings.min_not_ready_seconds == 0 and settings.fencing == "none":
        # With fencing, confirmed before anything is touched, no wait is FENCED_MIN_NOT_READY_SECONDS' default.
        found.append(("min-not-ready", "MIN_NOT_READY_SECONDS=0 with FENCING=none: a node is down at the node "
                                       "lifecycle controller's first verdict, with no margin and no fencing"))
    if settings.storm_cooldown_seconds == 0:
        found.append(("storm-cooldown", "STORM_COOLDOWN_SECONDS=0: after a brake trips, passes act again at the "
                                        "first calm moment, so a flapping partition may have volumes released "
                                        "between two flaps"))
    label = settings.redfish_node_label
    if settings.fencing == "redfish" and label and kubelet_may_set(label):
        # The label picks the BMC map entry, so the machine to power off: a node could point it at another's.
        found.append(("kubelet-label", f"REDFISH_NODE_LABEL={label}: a node's own kubelet may set this label on its "
                                       "Node (NodeRestriction allows it), and so choose which BMC map entry, and "
                                       "which machine, answers for it; use a node-restriction.kubernetes.io/ key"))
    return found


def check_unsafe(settings: Settings) -> None:
    """ConfigError naming the first rule switched off that ALLOW_UNSAFE does not acknowledge."""
    for rule, disables in switched_off(settings):
        if rule not in settings.allow_unsafe:
            raise ConfigError(f"{disables}; allowed: a safer value, or ALLOW_UNSAFE={rule} to accept it")
