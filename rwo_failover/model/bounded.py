"""What we write from data others wrote, bounded: a log line, an Event and an annotation each have a receiver
with a limit (a container runtime splits a log line past 16 KiB; the API server refuses an object whose
annotations total more than 256 KiB, a budget all our records on one object share). A node's kubelet writes its
addresses and bootID, a storage controller its fence's message: neither may make a write of ours too big."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

DIGEST = "sha256:"
LISTED_CHARS = 600  # a message names objects up to about this many characters, then counts the rest
MAX_ADDRESSES_NOTE = 16 * 1024  # a machine's addresses as recorded on our own NetworkFence: past this, their digest
# ...and on the Node, in our taint's record, which only people read: its 256 KiB of annotations is shared with every
# other writer of the Node (245 KiB of kubectl's last-applied configuration is legal), so ours stays small.
MAX_NODE_ADDRESSES_NOTE = 1024
MAX_MESSAGE_NOTE = 1024  # a controller's message as recorded: past this, its digest
# A bootID as kubelets write it (a UUID); anything else, or longer, is recorded by its digest, so what a kubelet
# wrote can never make our record too big to write, and the record always reads back as written.
_PLAIN_BOOT_ID = re.compile(r"[A-Za-z0-9-]{1,64}")  # whole text only: fullmatch (a `$` passes "x\n")


def note(text: str, limit: int) -> str:
    """`text` as we record it: as it is up to `limit` characters, else `sha256:` and its digest. Compare a record
    with what is read now by the same note: the digest is all a long one keeps."""
    return text if len(text) <= limit else DIGEST + hashlib.sha256(text.encode()).hexdigest()


def boot_id_note(boot_id: str) -> str:
    """A bootID as recorded: as written when it looks like one, else its digest."""
    if not boot_id or _PLAIN_BOOT_ID.fullmatch(boot_id):
        return boot_id
    return DIGEST + hashlib.sha256(boot_id.encode()).hexdigest()


def bounded_list(items: Sequence[str], limit: int = LISTED_CHARS) -> str:
    """`items` joined, up to about `limit` characters, then how many more: a message never grows with them."""
    shown: list[str] = []
    for item in items:
        if shown and sum(len(s) + 2 for s in shown) + len(item) > limit:
            break
        shown.append(item[:limit])
    rest = len(items) - len(shown)
    return ", ".join(shown) + (f" and {rest} more" if rest else "")
