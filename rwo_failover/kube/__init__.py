"""API access: everything that talks to the Kubernetes API server, and nothing that decides.

`transport` makes one call with bounded retries under the pass deadline; `lists` pages and watches on top of
it; `decode` turns answers into the few fields a pass reads (`shapes`), an object that cannot be read into
one skip; `api` names each call a pass makes (its RBAC verb and resource); `errors` says how a call can fail;
`credentials` loads kubeconfig or in-cluster config; `clock` is the API server's clock, from the Date header;
`reflector`, `sources` and `cache` are continuous mode's watch cache (list, then watch, as client-go's
reflector); `leader` is the leader election of the HA mode.

May use: settings, the object model, the official kubernetes client, urllib3, tenacity, msgspec, ijson and
the standard library. Never the planner, observe, act or run: this layer moves bytes and converts them, it
never judges.
"""

from .api import ELECTION_LEASES, LEASE_NAMESPACE, NETWORK_FENCES, RECOVERY_RECORDS, Api, parse_version
from .cache import WatchedCluster
from .clock import ServerClock, ServerClockUnknown, SharedServerClock
from .credentials import USER_AGENT, load_api_client
from .errors import NO_ANSWER, ApiError, Forbidden, OddAnswer, Unavailable, WriteStopped, describe, is_transient
from .leader import LeaderElector

__all__ = ["Api", "ApiError", "ELECTION_LEASES", "Forbidden", "LEASE_NAMESPACE", "LeaderElector", "NETWORK_FENCES",
           "NO_ANSWER", "OddAnswer", "RECOVERY_RECORDS", "ServerClock", "ServerClockUnknown", "SharedServerClock",
           "USER_AGENT", "Unavailable", "WatchedCluster", "WriteStopped", "describe", "is_transient", "load_api_client",
           "parse_version"]
