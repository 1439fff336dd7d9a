"""metadata.managedFields as the API server keeps them, for the fixture and the builders.

rwo-failover times liveness on the API server's clock by reading these entries' `time`, which the server
stamps with its own clock whenever a manager's write changes anything (staging/.../managedfields/internal/
managedfieldsupdater.go: `managed.Times()[manager] = &metav1.Time{Time: time.Now().UTC()}` when the
operation took fields). Seen on the real v1.36 control plane: a Lease renewal at 12.53 s is stamped `12Z`;
a kubelet status post and the node lifecycle controller's Ready=Unknown each stamp their manager's
`status` entry with the second of the write. Entries are keyed by manager, operation and subresource.

Field ownership (`fieldsV1`) is not modelled: nothing here reads it. What a hostile tenant can write there
is: `fieldsV1` nested 10,000 levels deep (the API server's decoder limit; Python's json cannot even encode
that, so `nested` leaves a marker the fixture's store expands into the bytes), and `bulky` entries as large
as the object limit allows (issue 26).
"""

from __future__ import annotations

import re

# What a write may change without changing the object: the server's own bookkeeping.
_BOOKKEEPING = ("resourceVersion", "managedFields", "generation")


def manager_of(user_agent: str, field_manager: str = "") -> str:
    """The manager name the real server uses: ?fieldManager=, else the User-Agent up to its first '/'."""
    return field_manager or (user_agent.split("/", 1)[0] if user_agent else "unknown")


def entry(manager: str, time: str, subresource: str = "", *, operation: str = "Update",
          api_version: str = "v1") -> dict:
    found = {"manager": manager, "operation": operation, "apiVersion": api_version, "time": time,
             "fieldsType": "FieldsV1", "fieldsV1": {}}
    if subresource:
        found["subresource"] = subresource
    return found


def _content(obj: dict) -> dict:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _BOOKKEEPING}
    return dict(obj, metadata=meta)


def changed(old: dict | None, new: dict) -> bool:
    """Whether a write changes the object; the real server does not write (nor bump resourceVersion) when not."""
    return old is None or _content(old) != _content(new)


def stamp(old: dict | None, new: dict, manager: str, *, subresource: str, now: str, api_version: str) -> None:
    """Give `new` the entries of `old`, with this manager's entry (for this subresource) stamped `now`."""
    entries = [dict(e) for e in ((old or {}).get("metadata") or {}).get("managedFields") or ()]
    key = (manager, "Update", subresource)
    kept = [e for e in entries if (e.get("manager"), e.get("operation"), e.get("subresource", "")) != key]
    new.setdefault("metadata", {})["managedFields"] = kept + [entry(manager, now, subresource,
                                                                     api_version=api_version)]


_NESTED = re.compile(rb'"@@nested:(\d+)@@"')


def nested(depth: int) -> str:
    """A marker for a fieldsV1 nested `depth` levels deep; FakeApiServer stores it expanded (`expand`)."""
    return f"@@nested:{depth}@@"


def expand(raw: bytes) -> bytes:
    """The stored bytes with each `nested` marker replaced by that deep an object, as the real server keeps it."""
    if b"@@nested:" not in raw:
        return raw
    return _NESTED.sub(lambda m: b'{"f:a":' * int(m[1]) + b"{}" + b"}" * int(m[1]), raw)


def hostile_entry(fields: object, manager: str = "tenant") -> dict:
    """A managedFields entry a tenant wrote with its own client (an Update with a fieldsV1 of its choosing)."""
    return dict(entry(manager, "2026-11-21T10:00:00Z"), fieldsV1=fields)


def bulky(size: int) -> dict:
    """A fieldsV1 of about `size` bytes of JSON: field ownership of a huge object (or a tenant's padding)."""
    return {f"f:k{i:07d}": {} for i in range(max(1, size // 15))}
