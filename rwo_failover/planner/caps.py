"""MAX_PODS_PER_PASS: how many pods one pass deletes, taken fairly across namespaces.

A cap, not a refusal. Any tenant may bind pods to a dead node (spec.nodeName) and delete them, and they stay
Terminating for good: a refusal of the whole pass past the cap let one tenant stop every failover in the
cluster. So a pass deletes at most MAX_PODS_PER_PASS pods, taken round-robin across namespaces (each
namespace's by node, then name), and later passes take the rest. Refusing loudly stays with the brakes
that say the cluster may be partitioned (the unhealthy fraction, too many nodes).

The namespace that goes first turns every minute of the server's clock: pods that stay stuck (held by a
finalizer) are planned again every pass, and in a fixed order namespaces that sort first would keep a later
one waiting for ever.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from itertools import zip_longest

from .types import NodePlan, PodAction, Skip


def _fair_order(pods: Sequence[PodAction], turn: int) -> list[PodAction]:
    """Round-robin across namespaces (sorted, then turned by `turn`), each namespace's pods by node, then name."""
    by_namespace: dict[str, list[PodAction]] = {}
    for pod in sorted(pods, key=lambda p: (p.namespace, p.node, p.name)):
        by_namespace.setdefault(pod.namespace, []).append(pod)
    names = sorted(by_namespace)
    first = turn % len(names) if names else 0
    rounds = zip_longest(*(by_namespace[ns] for ns in names[first:] + names[:first]))
    return [pod for row in rounds for pod in row if pod is not None]


def cap_pods(node_plans: Sequence[NodePlan], cap: int,
             turn: int = 0) -> tuple[tuple[NodePlan, ...], tuple[str, ...], list[Skip]]:
    """The node plans with at most `cap` pods among them; the pods left for later passes; a skip for each.
    `turn` (the minute of the server's clock) picks the namespace that goes first.

    A node with a pod left for later loses this pass's out-of-service taint (it would have Kubernetes delete
    that pod too) and the attachments that wait for that pod; when the taint was to go on first (storage that
    fences on it, planner.taint), all its attachments wait for the pass that adds it."""
    pods = [p for n in node_plans for p in n.pods]
    if len(pods) <= cap:
        return tuple(node_plans), (), []
    later = {p.key for p in _fair_order(pods, turn)[cap:]}
    skips = [Skip("pod", key, f"deferred: a pass deletes MAX_PODS_PER_PASS={cap} pods, taken fairly across "
                              "namespaces; a later pass takes this one") for key in sorted(later)]
    capped = []
    for plan in node_plans:
        kept = tuple(p for p in plan.pods if p.key not in later)
        if len(kept) == len(plan.pods):
            capped.append(plan)
            continue
        attachments = tuple(a for a in plan.attachments if not set(a.after_pods) & later)
        if plan.add_taint and plan.taint_first:
            skips += [Skip("volumeattachment", a.name, "deferred: released only once the out-of-service taint is "
                           "on (ceph-csi fences on it), which waits for the deferred pods") for a in attachments]
            attachments = ()
        capped.append(dataclasses.replace(plan, pods=kept, attachments=attachments, add_taint=False))
    return tuple(capped), tuple(sorted(later)), skips
