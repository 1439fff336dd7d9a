"""The collections continuous mode watches, and what in each object is worth a pass."""

from __future__ import annotations

from collections.abc import Hashable

from ..model import (
    CONTROL_NAME,
    RECOVERY_LABEL,
    TAINT_RECORD_LABEL,
    Control,
    Fence,
    Node,
    Pod,
    RecoveryEntry,
    TaintRecord,
)
from ..model.matchers import any_taint_matches
from ..settings import Settings
from . import shapes
from .source import Source


def node_signature(node: Node, settings: Settings) -> Hashable:
    """What makes a pass worth running: the Ready condition, and the taints of a node carrying a
    shutdown or out-of-service taint (any change to them can change its verdict: liveness times their last
    write). Other taints on other nodes change no verdict: an autoscaler's or a problem detector's taint churn
    starts no pass (a pass a second at 5,000 nodes while one flapped). Heartbeats (and the status-write time
    they move) are not in it; time alone changes verdicts through Plan.wake_at."""
    judged = node.has_oos_taint or any_taint_matches(settings.shutdown_taints, [t.as_dict() for t in node.taints])
    return node.taints if judged else (), node.ready, node.ready_since


NODES = Source("nodes", "node", lambda api, _s, fresh, convert: api.list_nodes(convert, fresh),
               lambda api, _s, version, timeout, w: api.watch_nodes(version, timeout, w),
               Node.from_json, node_signature, shapes.Node)
FENCES = Source("networkfences", "networkfence",
                lambda api, _s, fresh, convert: api.list_networkfences(convert, fresh),
                lambda api, _s, version, timeout, w: api.watch_networkfences(version, timeout, w),
                Fence.from_json, lambda f, _s: f, shapes.Fence)
RECOVERY_RECORDS = Source(
    "recovery records", "recovery record",
    lambda api, s, fresh, convert: api.list_recovery_records(s.recovery_namespace, RECOVERY_LABEL, convert,
                                                                  consistent=fresh),
    lambda api, s, version, timeout, w: api.watch_recovery_records(s.recovery_namespace, RECOVERY_LABEL, version,
                                                                   timeout_seconds=timeout, watcher=w),
    RecoveryEntry.from_json, lambda e, _s: e, shapes.Record)
# Our records of the out-of-service taints we added: which taint is ours is read from them, never from the Node.
TAINT_RECORDS = Source(
    "taint records", "taint record",
    lambda api, s, fresh, convert: api.list_taint_records(s.recovery_namespace, TAINT_RECORD_LABEL, convert,
                                                               consistent=fresh),
    lambda api, s, version, timeout, w: api.watch_taint_records(s.recovery_namespace, TAINT_RECORD_LABEL, version,
                                                                timeout_seconds=timeout, watcher=w),
    TaintRecord.from_json, lambda r, _s: r, shapes.Record)
# The pause switch: a change to it is a pass within a second, and the write guard asks this copy before every
# write. The storm moments a pass writes there are not worth a pass (their echo would be one); the cool-down's end
# wakes a pass through Plan.wake_at, and an operator's removing them is seen by the next pass.
CONTROL = Source(
    "control", "control",
    lambda api, s, fresh, convert: api.list_control(s.recovery_namespace, CONTROL_NAME, convert, consistent=fresh),
    lambda api, s, version, timeout, w: api.watch_control(s.recovery_namespace, CONTROL_NAME, version,
                                                          timeout_seconds=timeout, watcher=w),
    Control.from_json, lambda c, _s: (c.paused, c.paused_by, c.reason, c.switch_error, c.requests),
    shapes.Control, absent=(False, "", "", "", ()))


def pod_signature(pod: Pod, _settings: Settings) -> Hashable:
    """What in a pod on a proven-down node can change what a pass does with it: a deletionTimestamp, its phase,
    status reason and readiness, what it mounts, its opt-out and labels (POD_SELECTOR); a new pod (another uid)."""
    return (pod.uid, pod.deleting, pod.phase, pod.reason, pod.ready, pod.claims, pod.opted_out,
            tuple(sorted(pod.labels.items())))


def pods_on(node: str) -> Source[Pod]:
    """The pods bound to one node (fieldSelector spec.nodeName, which the API server's watch cache indexes)."""
    return Source(f"pods on {node}", "pod",
                  lambda api, _s, fresh, convert: api.list_pods_on(node, convert, fresh),
                  lambda api, _s, version, timeout, w: api.watch_pods_on(node, version, timeout, watcher=w),
                  Pod.from_json, pod_signature, shapes.Pod)
