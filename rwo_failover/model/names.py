"""Names the API server and rwo-failover give things: object-name rules, and our labels, annotations and
taint keys. Pure constants and one validator."""

from __future__ import annotations

import re

OPT_OUT_ANNOTATION = "rwo-failover.io/opt-out"
# The same key as a Node *label* (so `kubectl get nodes -l` finds them): a node we never judge, taint, fence or
# free. Any value but "false" opts out, as the annotation's.
NODE_OPT_OUT_LABEL = OPT_OUT_ANNOTATION
# On each record of an out-of-service taint we added (a ConfigMap in RECOVERY_NAMESPACE, model/taint_record.py):
# a pass finds them with one label-selected list. Until version 0.2 the record was annotations on the Node,
# which its own kubelet may write; they are read no more (CHANGELOG says what to do with a taint they record).
TAINT_RECORD_LABEL = "rwo-failover.io/taint-record"
# UNDO=operator: an operator's word that the machine was power-cycled since we acted, as this annotation ("true")
# on our own record of that outage: the taint record in RECOVERY_NAMESPACE, or our NetworkFence. No kubelet may
# write either, and the word lives and dies with the record of the one outage it was given for: it cannot be
# replayed for another (a label on the Node, bound to a bootID, could be: the node reports the bootID it likes).
POWER_CYCLED_ANNOTATION = "rwo-failover.io/power-cycled"
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


# Under the NodeRestriction admission plugin a kubelet may set on its own Node every label but those in the
# node-restriction.kubernetes.io/ namespace and the kubernetes.io and k8s.io namespaces (and their subdomains),
# where it may set only these keys and the kubelet.kubernetes.io/ and node.kubernetes.io/ namespaces
# (k8s.io/kubelet/pkg/apis: IsKubeletLabel; plugin/pkg/admission/noderestriction).
KUBELET_LABELS = frozenset({
    "kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch", "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch", "beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone", "topology.kubernetes.io/region", "node.kubernetes.io/windows-build"})
_KUBELET_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def _in(namespace: str, domain: str) -> bool:
    return namespace == domain or namespace.endswith("." + domain)


def kubelet_may_set(key: str) -> bool:
    """Whether a node's own kubelet may set this label key on its Node under NodeRestriction."""
    namespace = key.split("/", 1)[0] if "/" in key else ""
    if _in(namespace, "node-restriction.kubernetes.io"):
        return False
    if not (_in(namespace, "kubernetes.io") or _in(namespace, "k8s.io")):
        return True
    return key in KUBELET_LABELS or any(_in(namespace, allowed) for allowed in _KUBELET_NAMESPACES)


# UUIDs that firmware leaves unset and many machines share: all zeros, all ones, and boards whose SMBIOS data reads
# "To be filled by O.E.M." (AMI's default, in either byte order). Cloned VM templates share others: a systemUUID
# that two nodes report identifies neither (planner/fencing.py).
PLACEHOLDER_UUIDS = frozenset({"0" * 32, "f" * 32, "03000200040005000006000700080009",
                               "00020003000400050006000700080009"})


def same_uuid(text: object) -> str:
    """A UUID as 32 lowercase hex digits, however written (the kubelet's lowercase with dashes, a BMC's upper
    case, braces); "" when it is none, or a placeholder that many machines share."""
    if not isinstance(text, str):
        return ""
    digits = text.strip().strip("{}").replace("-", "").lower()
    if len(digits) != 32 or any(c not in "0123456789abcdef" for c in digits) or digits in PLACEHOLDER_UUIDS:
        return ""
    return digits
