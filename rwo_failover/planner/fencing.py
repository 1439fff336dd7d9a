"""Fencing: which proven-down nodes must be fenced before anything on them is touched, and when to unfence.

With FENCING set, a node with work is acted on only once fencing is confirmed: a NetworkFence of ours for
exactly the node's current InternalIP addresses that answered Succeeded for its current spec, or (webhook) an
answer in this pass that names the node. Until then nothing on it is touched: no pod, no attachment, no
taint. A node without an address, or with one another node also has, is never fenced by us (a NetworkFence
would cut off nothing, or someone else). Unfencing comes first when the node is back: set Unfenced, wait for
Succeeded, delete the object; only then may our out-of-service taint come off. Unfencing lifts only what we
made, for the machine we made it for, once that machine has been power-cycled (planner/undo.py: the rule our
taint follows too): a fence without our record of its machine, made for another Node object
under the name (a re-registered machine), or for other addresses than the node has now, is left in place
(HOLD) for a human, with a Warning and a metric, since the fenced machine may still run.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from datetime import datetime

from ..model import Fence, Lease, Node, Snapshot, addresses_note
from ..model.names import NODE_OPT_OUT_LABEL, POWER_CYCLED_ANNOTATION, same_uuid
from ..settings import Settings
from .nodes import shutdown_taint
from .taint import recovered
from .types import Skip
from .undo import reboot_blocker

REQUEST = "request"    # create the fence, or call the webhook
RECREATE = "recreate"  # our fence is Unfenced (an earlier recovery) and the node is down again: delete it, so
#                        the next pass creates a new one, whose every result is for its one spec
PENDING = "pending"    # asked; no answer yet: the next pass looks again
FAILED = "failed"      # fencing cannot be confirmed: a Warning, nothing on the node touched
UNFENCE = "unfence"    # the node is back: ask for Unfenced
DELETE = "delete"      # Unfenced and Succeeded: remove the object
HOLD = "hold"          # the node is back, but the fence is not ours to lift for it: left in place for a human
# Why a fence is held, as a metric label: a short, fixed set.
HELD_NO_RECORD, HELD_OTHER_MACHINE, HELD_ADDRESSES = "no-record", "other-machine", "addresses"
HELD_NOT_REBOOTED = "not-rebooted"  # back, but not proven power-cycled (planner/undo.py), as our taint would be
HELD_REASONS = (HELD_NO_RECORD, HELD_OTHER_MACHINE, HELD_ADDRESSES, HELD_NOT_REBOOTED)


def cidrs(node: Node) -> tuple[tuple[str, ...], str | None]:
    """The node's InternalIP addresses as /32 (IPv6: /128), sorted; or why the node cannot be fenced by them."""
    found = []
    for text in node.internal_ips:
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            return (), f"node {node.name} has an InternalIP that is not an IP address ({text[:60]!r})"
        if address.is_unspecified or address.is_loopback or address.is_multicast or address.is_reserved:
            return (), f"node {node.name} has InternalIP {address}, which fences nothing of its own"
        found.append(f"{address.compressed}/{address.max_prefixlen}")
    if not found:
        return (), f"node {node.name} has no InternalIP address: a NetworkFence would fence nothing"
    return tuple(sorted(set(found))), None


def _addresses(node: Node) -> set[str]:
    """The node's InternalIPs, each written one way (fd00:0:0:0::5 is fd00::5); what does not parse, as it is."""
    found = set()
    for text in node.internal_ips:
        try:
            found.add(ipaddress.ip_address(text).compressed)
        except ValueError:
            found.add(text)
    return found


def _cidr(text: str) -> str:
    try:
        return ipaddress.ip_network(text, strict=False).compressed
    except ValueError:
        return text


def _shared(node: Node, snapshot: Snapshot) -> str | None:
    """An address the kubelet of another node also reports: fencing it would cut that node off too."""
    mine = _addresses(node)
    for other in snapshot.nodes:
        both = mine & _addresses(other)
        if other.name != node.name and both:
            return f"node {node.name} reports InternalIP {sorted(both)[0]}, which node {other.name} also reports"
    return None


def bmc_key(node: Node, settings: Settings) -> str:
    """What keys the node's entry in REDFISH_BMC_FILE: the value of REDFISH_NODE_LABEL, or the node's name."""
    label = settings.redfish_node_label
    return (node.label(label) or "") if label else node.name


def _shared_bmc(node: Node, snapshot: Snapshot, settings: Settings) -> str | None:
    """FENCING=redfish: another node carrying the same REDFISH_NODE_LABEL value would make one BMC the witness for
    two machines (a copied label), and one's Off prove the other down."""
    label, key = settings.redfish_node_label, bmc_key(node, settings)
    if label and key:
        other = next((o.name for o in snapshot.nodes if o.name != node.name and o.label(label) == key), None)
        if other:
            return f"node {other} carries the same value of label {label}, which keys REDFISH_BMC_FILE: one BMC " \
                   "cannot answer for two nodes"
    return None


def uuid_twin(node: Node, snapshot: Snapshot) -> str:
    """Another node reporting the same systemUUID (cloned VM templates, boards whose firmware left it at a
    default), or "": such a UUID identifies neither machine, so a map entry that names its machine by uuid cannot
    be matched to this node (act/power.py; an entry that names it by serial can)."""
    uuid = same_uuid(node.system_uuid)
    return next((o.name for o in snapshot.nodes if o.name != node.name and same_uuid(o.system_uuid) == uuid),
                "") if uuid else ""


def fence_step(node: Node, snapshot: Snapshot, settings: Settings) -> tuple[str | None, str]:
    """For a proven-down node with work: the fencing step still needed (None: fenced, go on), and why."""
    if settings.fencing == "none":
        return None, ""
    if settings.fencing == "webhook":
        return REQUEST, "the fence webhook must answer fenced before anything is touched"
    if settings.fencing == "redfish":
        why = _shared_bmc(node, snapshot, settings)
        if why:
            return FAILED, f"{why}; not proven down, and so not released"
        return REQUEST, "its BMC must answer PowerState Off before anything is touched"
    wanted, why = cidrs(node)
    why = why or _shared(node, snapshot)
    if why:
        return FAILED, f"{why}; not fenced, and so not released"
    unreadable = next((u for u in snapshot.unreadable if u.kind == "networkfence" and u.name == node.name), None)
    if unreadable is not None:
        return FAILED, f"NetworkFence {node.name} cannot be read ({unreadable.reason}); not touching it"
    fence = snapshot.fences.get(node.name)
    if fence is None:
        return REQUEST, "no NetworkFence yet"
    return judge_fence(node, fence, wanted)


def judge_fence(node: Node, fence: Fence, wanted: tuple[str, ...]) -> tuple[str | None, str]:
    """What a NetworkFence for this node says now: fenced (None), PENDING, RECREATE or FAILED, and why. Also
    used on a fence read live while a pass waits for its answer."""
    if not fence.ours:
        return FAILED, f"NetworkFence {node.name} exists and was not created by rwo-failover; not touching it"
    if fence.deleting:
        return PENDING, f"NetworkFence {node.name} is being deleted; a new one is asked for once it is gone"
    if fence.state != "Fenced":
        return RECREATE, "our NetworkFence is Unfenced, and the node is down again"
    if tuple(sorted({_cidr(c) for c in fence.cidrs})) != wanted:
        return FAILED, _other_addresses(node, fence, wanted)
    if fence.result == "Succeeded":
        return None, "fenced"
    if fence.result == "Failed":
        return FAILED, f"NetworkFence {node.name} answered Failed: {fence.message or 'no message'}"
    return PENDING, f"NetworkFence {node.name} has not answered its current spec yet"


def _other_addresses(node: Node, fence: Fence, wanted: tuple[str, ...]) -> str:
    """Why our fence for other addresses is refused, and what a human does. Never "just unfence it": it may be
    the fence of a machine that still runs (another one registered under the name since, say)."""
    machine = fence.machine
    whose = f" was made for another machine (Node uid {machine.uid[:64]}) and" \
        if machine is not None and machine.uid != node.uid else ""
    return (f"NetworkFence {node.name}{whose} fences {_few(fence.cidrs)}, but the node's addresses are "
            f"{_few(wanted)}; not trusted: a human checks the machine at those addresses is off, then unfences "
            f"and deletes it")


def unfence_step(node: Node | None, lease: Lease | None, fence: Fence, *, settings: Settings,
                 now: datetime) -> tuple[str | None, str | None]:
    """For one NetworkFence of ours: (UNFENCE or DELETE, None) once its node is back for good and the fence was
    made for that machine; (HOLD, why) when it was not (held_by); else (None, why it stays, or None when nothing
    needs saying). Act re-judges with this on a live read before each step."""
    if node is None:
        return None, "its node is gone; the fence stays until a human removes it"
    reason = recovered(node, lease, settings, now=now)
    if reason is None and shutdown_taint(node, settings.shutdown_taints):
        reason = "the node still carries a shutdown taint"
    if reason:
        return None, f"stays fenced: {reason}" if fence.state == "Unfenced" or node.ready == "True" else None
    # Only a fence that may still fence is held: once it answered Unfenced (asked by us for the machine judged
    # then, or by a human), deleting it lifts nothing, and holding it would send a human to find a fenced machine.
    lifted = fence.state == "Unfenced" and fence.result == "Succeeded"
    held = held_by(node, fence, settings) if not lifted else None
    if held:
        return HOLD, held[1]
    if fence.deleting:
        return None, "being deleted"
    if fence.state == "Fenced":
        return UNFENCE, None
    if fence.result == "Succeeded":
        return DELETE, None
    if fence.result == "Failed":
        return None, f"unfencing answered Failed: {fence.message or 'no message'}"
    return None, "unfencing asked; no answer yet"


def held_by(node: Node, fence: Fence, settings: Settings) -> tuple[str, str] | None:
    """(HELD_* kind, why) when our fence must not be lifted for this node as read now; None when it was made
    for this very machine (the same Node object, at the addresses it fences, which are the node's now) and that
    machine has been power-cycled since, by UNDO's proof: the rule our out-of-service taint follows."""
    tail = "; left in place: a human checks the fenced machine is off, then unfences and deletes it"
    machine = fence.machine
    if machine is None:
        return HELD_NO_RECORD, (f"NetworkFence {fence.node} carries no record of the machine rwo-failover made it "
                                f"for, so rwo-failover never lifts it{tail}")
    if machine.uid != node.uid:
        return HELD_OTHER_MACHINE, (f"NetworkFence {fence.node} was made for another machine (Node uid "
                                    f"{machine.uid[:64]}) than the node now registered as {node.name} "
                                    f"({node.uid[:64]}): the fenced machine may still run{tail}")
    fenced, now = tuple(sorted({_cidr(c) for c in fence.cidrs})), cidrs(node)[0]
    recorded = addresses_note(tuple(sorted({_cidr(c) for c in machine.cidrs}))) if machine.cidrs else machine.addresses
    if not (fenced == now and addresses_note(now) == recorded):
        return HELD_ADDRESSES, (f"NetworkFence {fence.node} fences {_few(fence.cidrs)} (made for "
                                f"{_few(machine.cidrs or [machine.addresses])}), but the node's addresses are now "
                                f"{_few(sorted(_addresses(node)))}{tail}")
    why = reboot_blocker(node, machine.boot_id, "our NetworkFence", settings=settings, acknowledged=fence.acknowledged,
                         confirm=f"kubectl annotate networkfence {fence.node} {POWER_CYCLED_ANNOTATION}=true")
    if why:
        return HELD_NOT_REBOOTED, (f"NetworkFence {fence.node}: {why}; reboot the machine (a new bootID lets "
                                   "rwo-failover lift it), or unfence and delete it by hand once nothing there can "
                                   "still write to the volumes it released")
    return None


def _few(texts: Iterable[str], most: int = 4) -> str:
    """At most `most` of them, each cut short, for a message: what is quoted comes from objects others write."""
    found = [t[:64] for t in texts]
    shown = ", ".join(found[:most]) or "nothing"
    return f"{shown} and {len(found) - most} more" if len(found) > most else shown


def unfence_steps(snapshot: Snapshot, settings: Settings) -> tuple[tuple[tuple[str, str], ...], list[Skip],
                                                                    tuple[tuple[str, str, str], ...]]:
    """(node, UNFENCE or DELETE) for each NetworkFence of ours whose node is back for good; skips for the rest;
    and (node, HELD_* kind, why) for each one left in place for a human."""
    if settings.fencing != "networkfence":
        return (), [], ()
    nodes = snapshot.by_name
    steps, skips, held = [], [], []
    for name, fence in sorted(snapshot.fences.items()):
        if not fence.ours:
            continue
        if name in nodes and nodes[name].opted_out:
            skips.append(Skip("networkfence", name, f"its node is opted out by the label {NODE_OPT_OUT_LABEL}"))
            continue
        node = nodes.get(name)
        step, why = unfence_step(node, snapshot.leases.get(name), fence, settings=settings, now=snapshot.now)
        found = held_by(node, fence, settings) if step == HOLD and node is not None else None
        if found:
            held.append((name, *found))
            skips.append(Skip("networkfence", name, found[1]))
        elif step:
            steps.append((name, step))
        elif why:
            skips.append(Skip("networkfence", name, why))
    return tuple(steps), skips, tuple(held)
