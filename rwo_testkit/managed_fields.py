"""metadata.managedFields as the API server keeps them, for the fixture and the builders.

rwo-failover times liveness on the API server's clock by reading these entries' `time`, which the server
stamps with its own clock whenever a manager's write changes anything (staging/.../managedfields/internal/
managedfieldsupdater.go: `managed.Times()[manager] = &metav1.Time{Time: time.Now().UTC()}` when the
operation took fields). Seen on the real v1.36 control plane: a Lease renewal at 12.53 s is stamped `12Z`;
a kubelet status post and the node lifecycle controller's Ready=Unknown each stamp their manager's
`status` entry with the second of the write. Entries are keyed by manager, operation and subresource.

Field ownership (`fieldsV1`) is not modelled: nothing here reads it.
"""

from __future__ import annotations

from typing import Optional

# What a write may change without changing the object: the server's own bookkeeping.
_BOOKKEEPING = ("resourceVersion", "managedFields", "generation")


def manager_of(user_agent: str, field_manager: str = "") -> str:
    """The manager name the real server uses: ?fieldManager=, else the User-Agent up to its first '/'."""
    return field_manager or (user_agent.split("/", 1)[0] if user_agent else "unknown")


def entry(manager: str, time: str, subresource: str = "", operation: str = "Update",
          api_version: str = "v1") -> dict:
    found = {"manager": manager, "operation": operation, "apiVersion": api_version, "time": time,
             "fieldsType": "FieldsV1", "fieldsV1": {}}
    if subresource:
        found["subresource"] = subresource
    return found


def _content(obj: dict) -> dict:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _BOOKKEEPING}
    return dict(obj, metadata=meta)


def changed(old: Optional[dict], new: dict) -> bool:
    """Whether a write changes the object; the real server does not write (nor bump resourceVersion) when not."""
    return old is None or _content(old) != _content(new)


def stamp(old: Optional[dict], new: dict, manager: str, subresource: str, now: str, api_version: str) -> None:
    """Give `new` the entries of `old`, with this manager's entry (for this subresource) stamped `now`."""
    entries = [dict(e) for e in ((old or {}).get("metadata") or {}).get("managedFields") or ()]
    key = (manager, "Update", subresource)
    kept = [e for e in entries if (e.get("manager"), e.get("operation"), e.get("subresource", "")) != key]
    new.setdefault("metadata", {})["managedFields"] = kept + [entry(manager, now, subresource,
                                                                     api_version=api_version)]
