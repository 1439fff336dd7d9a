"""The reads behind one-shot mode's wait for a quiet node (run/quiet_wait.py): the node Leases, then a node.

Reads only, through one Reader: a Lease or node that cannot be read is no sign, and never an exception."""

from __future__ import annotations

from enum import Enum

from ..kube import Api
from ..model import Lease, Node, Reader
from ..planner import shutdown_taint
from ..planner.quiet import going_quiet
from ..settings import Settings


class Now(Enum):
    TAINTED = "carries a shutdown taint"
    QUIET = "still quiet"
    GONE = "renewed its Lease, is gone, or opted out"


def quiet_nodes(api: Api, judged: set[str]) -> dict[str, str]:
    """The nodes not `judged` whose kubelet missed a Lease renewal (planner/quiet.py), each with the
    resourceVersion of its Lease as listed: another one later is a renewal."""
    reader = Reader()
    leases = reader.each(api.list_node_leases(reader.parse("lease", Lease.from_json)))
    quiet = set(going_quiet(leases, judged, api.server_clock.now()))
    return {lease.node: lease.version for lease in leases if lease.node in quiet}


def quiet_node_now(api: Api, settings: Settings, name: str, *, version: str) -> Now:
    """One quiet node read again: tainted for shutdown, still quiet, or renewed (or gone)."""
    reader = Reader()
    node = reader.one("node", Node.from_json, api.read_node(name), node=name)
    if node is not None and node.opted_out:
        return Now.GONE  # never judged: a pass again would find nothing new (its taint may be there for good)
    if node is not None and shutdown_taint(node, settings.shutdown_taints):
        return Now.TAINTED
    lease = reader.one("lease", Lease.from_json, api.read_lease(name), node=name)
    return Now.QUIET if node is not None and lease is not None and lease.version == version else Now.GONE
