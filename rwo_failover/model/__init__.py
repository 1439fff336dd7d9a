"""The object model: the slim, immutable view of cluster objects that a pass works on.

One module per Kubernetes kind (node, lease, pod, claim, volume, attachment, fence, recovery record), the
typed accessors every kind reads its JSON through (`fields`), the names and constants we share with the
cluster (`names`), label and taint matching (`matchers`), the Reader that turns JSON into these types or a
skip with a reason (`reader`), and the Snapshot a pass judges (`snapshot`). Observe converts raw API JSON into
these as it arrives, keeping only the fields the rules use, so a 5,000-node list never stays in memory whole.

May use: the standard library only. Everything else in rwo_failover may use this package.
"""

from .attachment import Attachment
from .claim import Claim
from .control import Control
from .fence import Fence, Machine, fence_asked
from .fields import (
                     TIME_YEARS,
                     BadObject,
                     Json,
                     bool_at,
                     int_at,
                     items_at,
                     obj_at,
                     opted_out,
                     parse_time,
                     server_time,
                     strings_at,
                     text_at,
                     texts_at,
                     time_at,
                     typed_at,
)
from .lease import Lease
from .names import (
                     CLOUD_SHUTDOWN_KEY,
                     CONTROL_NAME,
                     DEFAULT_LEASE_SECONDS,
                     DNS_LABEL,
                     DNS_SUBDOMAIN,
                     FENCE_ASKED_ANNOTATION,
                     FENCE_LABEL,
                     MIRROR_ANNOTATION,
                     MULTI_ATTACH_MODES,
                     OOS_ANNOTATION,
                     OPT_OUT_ANNOTATION,
                     OUT_OF_SERVICE_KEY,
                     OUT_OF_SERVICE_VALUE,
                     RECOVERY_ANNOTATION,
                     RECOVERY_LABEL,
                     is_name,
)
from .node import SHUTTING_DOWN, Node, Taint
from .pod import Pod
from .reader import Reader, Undecodable, name_of
from .recovery import RecoveryEntry
from .snapshot import Cached, Snapshot, Unreadable
from .volume import Volume

__all__ = [
    "Attachment", "BadObject", "CLOUD_SHUTDOWN_KEY", "CONTROL_NAME", "Cached", "Claim", "Control",
    "DEFAULT_LEASE_SECONDS", "DNS_LABEL",
    "DNS_SUBDOMAIN", "FENCE_ASKED_ANNOTATION", "FENCE_LABEL", "Fence", "Json", "Lease", "MIRROR_ANNOTATION",
    "Machine", "MULTI_ATTACH_MODES", "Node", "OOS_ANNOTATION", "OPT_OUT_ANNOTATION", "OUT_OF_SERVICE_KEY",
    "OUT_OF_SERVICE_VALUE",
    "Pod", "RECOVERY_ANNOTATION", "RECOVERY_LABEL", "Reader", "RecoveryEntry", "SHUTTING_DOWN", "Snapshot", "TIME_YEARS",
    "Taint", "Undecodable", "Unreadable", "Volume", "bool_at", "fence_asked", "int_at", "is_name", "items_at",
    "name_of", "obj_at", "opted_out", "parse_time", "server_time", "strings_at", "text_at", "texts_at", "time_at",
    "typed_at",
]
