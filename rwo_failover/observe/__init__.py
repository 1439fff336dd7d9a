"""Observe: the reads of one pass, into a model.Snapshot. Reads only: nothing here writes.

`snapshot` reads the nodes (or takes them, with our fences and recovery records, from continuous mode's watch
cache), the Leases of the nodes it judges, and only for nodes that are down or back from an outage their pods,
claims, PVs and attachments; `lookups` holds the object-by-object reads (a GET each, or one list); `quiet`
the reads behind one-shot mode's wait for a node whose kubelet went quiet.

May use: the API access layer (kube), the planner (which nodes to look at), the object model, settings and the
standard library. Never act or run.
"""

from .snapshot import check_server_clock, observe, observe_again

__all__ = ["check_server_clock", "observe", "observe_again"]
