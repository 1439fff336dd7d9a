"""The object model: the slim, immutable view of cluster objects that a pass works on.

One module per Kubernetes kind (node, lease, pod, claim, volume, attachment, fence, recovery record, taint
record), the
typed accessors every kind reads its JSON through (`fields`), the names and constants we share with the
cluster (`names`), label and taint matching (`matchers`), the Reader that turns JSON into these types or a
skip with a reason (`reader`), and the Snapshot a pass judges (`snapshot`). Observe converts raw API JSON into
these as it arrives, keeping only the fields the rules use, so a 5,000-node list never stays in memory whole.

May use: the standard library only. Everything else in rwo_failover may use this package.
"""

from .attachment import Attachment
from .bounded import DIGEST, boot_id_note, bounded_list
from .claim import Claim
from .control import Control
from .fence import Fence, Machine, addresses_note, fence_asked
from .fields import (
                     CLOCK_TOLERANCE_SECONDS,
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
                     OPT_OUT_ANNOTATION,
                     OUT_OF_SERVICE_KEY,
                     OUT_OF_SERVICE_VALUE,
                     POWER_CYCLED_ANNOTATION,
                     RECOVERY_ANNOTATION,
                     RECOVERY_LABEL,
                     TAINT_RECORD_LABEL,
                     is_name,
)
from .node import SHUTTING_DOWN, Node, Taint
from .pod import Pod
from .reader import Reader, Undecodable, name_of
from .recovery import RecoveryEntry
from .snapshot import Cached, Snapshot, Unreadable
from .taint_record import TaintRecord, record_name
from .volume import Volume

__all__ = [
    "addresses_note", "Attachment", "BadObject", "bool_at", "boot_id_note", "bounded_list", "Cached",
    "Claim", "CLOCK_TOLERANCE_SECONDS", "CLOUD_SHUTDOWN_KEY", "Control", "CONTROL_NAME", "DEFAULT_LEASE_SECONDS",
    "DIGEST", "DNS_LABEL", "DNS_SUBDOMAIN", "Fence", "fence_asked",
    "FENCE_ASKED_ANNOTATION", "FENCE_LABEL", "int_at", "is_name", "items_at", "Json", "Lease", "Machine",
    "MIRROR_ANNOTATION", "MULTI_ATTACH_MODES", "name_of", "Node", "obj_at",
    "OPT_OUT_ANNOTATION", "opted_out", "OUT_OF_SERVICE_KEY", "OUT_OF_SERVICE_VALUE", "parse_time",
    "Pod", "POWER_CYCLED_ANNOTATION", "Reader", "RECOVERY_ANNOTATION", "RECOVERY_LABEL", "record_name",
    "RecoveryEntry", "server_time", "SHUTTING_DOWN",
    "Snapshot", "strings_at", "Taint", "TAINT_RECORD_LABEL", "TaintRecord", "text_at", "texts_at", "time_at",
    "TIME_YEARS", "typed_at", "Undecodable", "Unreadable", "Volume"
]
