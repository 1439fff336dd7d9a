"""Start-up: do the namespaces and APIs the settings need exist? Each is asked with a server-side dry run of the
create a pass would make (stored nowhere, and under RBAC we hold anyway), so a 404 names exactly what is
missing. What is missing is said once, as a Warning naming the setting and what is off; the writes that need
it then fail, each with its cause (never taken for "someone else finished it")."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from ..kube import Api, ApiError
from ..kube.api import ELECTION_LEASES, NETWORK_FENCES, RECOVERY_RECORDS
from ..settings import Settings

log = logging.getLogger(__name__)
OFF = "off: what the settings need does not exist"
_PROBE = {"name": "rwo-failover-preflight", "labels": {"rwo-failover.io/preflight": "dry-run"}}


def _needs(settings: Settings) -> Iterator[tuple[str, str, str, dict[str, Any], str]]:
    """(setting, RBAC resource, path, body, what is off without it) for each create the settings make."""
    ns = settings.recovery_namespace
    yield (f"RECOVERY_NAMESPACE={ns}", RECOVERY_RECORDS, f"/api/v1/namespaces/{ns}/configmaps",
           {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _PROBE},
           "recovery confirmation: no record of a freed pod can be kept, so no RWOVolumeRecovered or "
           "RWOVolumeNotRecovered follows, and every pass that frees a pod fails; and the out-of-service taint: no "
           "record of it can be kept, so it is never added, and with the handoff on (OUT_OF_SERVICE_TAINT) no "
           "VolumeAttachment is released"
           + ("; and the storm cool-down (STORM_COOLDOWN_SECONDS): no storm moment can be kept, so after a brake "
              "the first calm pass acts" if settings.storm_cooldown_seconds else ""))
    if settings.leader_election:
        ns = settings.leader_election_namespace
        yield (f"LEADER_ELECTION_NAMESPACE={ns}", ELECTION_LEASES,
               f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
               {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": _PROBE},
               "leader election: no replica can take the leader Lease, so no pass runs")
    if settings.fencing == "networkfence":
        yield ("FENCING=networkfence", "networkfences", NETWORK_FENCES,
               {"apiVersion": "csiaddons.openshift.io/v1alpha1", "kind": "NetworkFence", "metadata": _PROBE,
                "spec": {"fenceState": "Fenced", "networkFenceClassName": settings.network_fence_class,
                         "cidrs": ["192.0.2.1/32"]}},
               "fencing: the csiaddons.openshift.io NetworkFence API is not installed, so no node is fenced and "
               "nothing fails over")


def check_install(api: Api, settings: Settings) -> list[str]:
    """Warn once for each namespace or API the settings need that does not exist; the settings named. Any other
    answer (RBAC, an unreachable server) is left to the pass, which reports it with its own exit code."""
    missing = []
    for setting, what, path, body, off in _needs(settings):
        try:
            api.dry_run_create(what, path, body)
        except ApiError as err:
            if err.status == 404:
                missing.append(setting)
                log.warning(OFF, extra={"setting": setting, "off": off, "error": str(err)})
    return missing
