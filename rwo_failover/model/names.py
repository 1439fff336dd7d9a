"""Names the API server and rwo-failover give things: object-name rules, and our labels, annotations and
taint keys. Pure constants and one validator."""

from __future__ import annotations

import re

OPT_OUT_ANNOTATION = "rwo-failover.io/opt-out"
# The same key as a Node *label* (so `kubectl get nodes -l` finds them): a node we never judge, taint, fence or
# free. Any value but "false" opts out, as the annotation's.
NODE_OPT_OUT_LABEL = OPT_OUT_ANNOTATION
# Set by us when we add the out-of-service taint; it records when, so the taint can be proven ours.
OOS_ANNOTATION = "rwo-failover.io/out-of-service-added-at"
# Written with it, in the same preconditioned patch: who added the taint (the provenance: OpenShift's two-node
# fencing marks its own the same way), and the machine it was added for. Our taint comes off only for that
# Node object (uid) after that machine rebooted (another bootID): a machine that only got its network back may
# still hold what the taint released.
OOS_APPLIED_BY = "rwo-failover.io/out-of-service-applied-by"
APPLIED_BY = "rwo-failover"
TAINT_NODE_UID = "rwo-failover.io/taint-node-uid"
TAINT_BOOT_ID = "rwo-failover.io/taint-boot-id"
TAINT_ADDRESSES = "rwo-failover.io/taint-addresses"  # status.addresses then, as type=address, comma-separated
TAINT_ANNOTATIONS = (OOS_ANNOTATION, OOS_APPLIED_BY, TAINT_NODE_UID, TAINT_BOOT_ID, TAINT_ADDRESSES)
# The one name for the out-of-service taint key across the code.
OUT_OF_SERVICE_KEY = "node.kubernetes.io/out-of-service"
OUT_OF_SERVICE_VALUE = "nodeshutdown"
CLOUD_SHUTDOWN_KEY = "node.cloudprovider.kubernetes.io/shutdown"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# The attach-detach controller allows a volume on several nodes when its PV lists either of these;
# otherwise a second attachment fails with Multi-Attach. That is what "exclusive" means here.
MULTI_ATTACH_MODES = frozenset({"ReadWriteMany", "ReadOnlyMany"})
DEFAULT_LEASE_SECONDS = 40  # the kubelet's node lease duration when the Lease does not say

# On each recovery record (a ConfigMap in RECOVERY_NAMESPACE, one per claim whose pod we force-deleted, until
# its recovery is confirmed or reported missing): a pass finds them with one label-selected list.
RECOVERY_LABEL = "rwo-failover.io/recovery"
# Where version 0.1 kept the record: on the claim itself, which its tenant may edit. Never read any more
# (docs/monitoring.md says why, and how to remove what 0.1 left behind).
RECOVERY_ANNOTATION = "rwo-failover.io/recovery"

FENCE_LABEL = "app.kubernetes.io/managed-by"  # value "rwo-failover": a NetworkFence we created
# On a NetworkFence of ours whose spec we changed (to Unfenced): which generation that made, and the status it
# had then. For a controller that sets no observedGeneration, a result counts for that generation only once
# the status differs from what it was when we asked.
FENCE_ASKED_ANNOTATION = "rwo-failover.io/asked"
# On each NetworkFence we create: the machine it was made for, so undo lifts it only for that machine. A Node
# deleted and re-registered under the same name is another object (another uid), maybe another machine at
# another address, while the fenced one may still run. The addresses are the spec.cidrs we asked for.
FENCE_NODE_UID_ANNOTATION = "rwo-failover.io/fence-node-uid"
FENCE_BOOT_ID_ANNOTATION = "rwo-failover.io/fence-boot-id"
FENCE_ADDRESSES_ANNOTATION = "rwo-failover.io/fence-addresses"


# Object names as the API server validates them (RFC 1123 subdomains; namespaces are labels). A name that is
# not one cannot exist, and must never be put in a request path: the client resolves "..", so a tenant's
# claimName of "../../nodes/x" would read another resource.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def is_name(text: object, namespace: bool = False) -> bool:
    """An object name (a namespace name with `namespace`) that the API server could hold."""
    if not isinstance(text, str):
        return False
    return bool(DNS_LABEL.match(text)) if namespace else len(text) <= 253 and bool(DNS_SUBDOMAIN.match(text))

# The control ConfigMap, in RECOVERY_NAMESPACE (ours; tenants cannot write there): an operator's pause switch
# (data.paused, with data.pausedBy and data.reason if they say so), and the storm cool-down's memory, which a
# CronJob's passes cannot keep themselves (data.stormTrippedAt, data.stormCalmSince; the API server's times).
CONTROL_NAME = "rwo-failover-control"
