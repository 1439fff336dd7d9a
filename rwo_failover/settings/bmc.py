"""The BMC map of FENCING=redfish (REDFISH_BMC_FILE): which BMC answers for which node, with what credentials.

The file is a Secret key mounted as a file: a JSON object from a key (the node's name, or the value of its
REDFISH_NODE_LABEL label) to {"endpoint", "username", "password", "ca"?}. `endpoint` is the https:// URL of
the node's ComputerSystem resource (/redfish/v1/Systems/<id>), without user:password@; `ca` is an optional PEM
bundle that verifies the BMC's certificate (else the system's CAs). It is read at start-up (exit 2 naming what
is wrong) and again before each call, so a rotated password is picked up. No message ever quotes the file, an
endpoint, a user name or a password: BmcMapError names the key and the field, never a value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Optional

from .urls import check_url

MAX_MAP_BYTES = 4 * 1024 * 1024
BMC_MAP_ALLOWED = ('a readable JSON file: {"<node name or label value>": {"endpoint": "https://...", "username": '
                   '"...", "password": "...", "ca": "<PEM, optional>"}}')


class BmcMapError(ValueError):
    """A BMC map that cannot be used; the message names what is wrong, never a value from the file."""


@dataclass(frozen=True)
class Bmc:
    endpoint: str = field(repr=False)
    username: str = field(repr=False)
    password: str = field(repr=False)
    ca: Optional[str] = field(default=None, repr=False)

    def __str__(self) -> str:  # never the address nor the credentials, wherever it is formatted
        return "Bmc(...)"


def _entry(key: str, raw: object) -> Bmc:
    where = f"entry {key!r}" if len(key) <= 63 and key.isprintable() else "an entry"
    if not isinstance(raw, dict):
        raise BmcMapError(f"{where} is not a JSON object")
    for name in ("endpoint", "username", "password"):
        if not isinstance(raw.get(name), str) or not raw[name]:
            raise BmcMapError(f"{where} has no {name} (a non-empty string)")
    ca = raw.get("ca")
    if ca is not None and (not isinstance(ca, str) or "-----BEGIN CERTIFICATE-----" not in ca):
        raise BmcMapError(f"{where} has a ca that is not a PEM certificate")
    try:
        endpoint = check_url(raw["endpoint"], ("https",), userinfo_ok=False)
    except ValueError as err:
        raise BmcMapError(f"{where} has an endpoint that is not an https:// URL ({err})") from None
    if "?" in endpoint or "#" in endpoint or "/redfish/v1/" not in endpoint:
        raise BmcMapError(f"{where} has an endpoint that is not a Redfish ComputerSystem URL "
                          "(https://host/redfish/v1/Systems/<id>, no query)")
    return Bmc(endpoint, raw["username"], raw["password"], ca)


def read_bmc_map(path: str) -> dict[str, Bmc]:
    """Every entry of the map at `path`; BmcMapError when the file, or any entry, cannot be used."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_MAP_BYTES + 1)
    except OSError as err:
        raise BmcMapError(err.strerror or type(err).__name__) from None
    if len(raw) > MAX_MAP_BYTES:
        raise BmcMapError(f"it is longer than {MAX_MAP_BYTES} bytes")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # its messages hold positions only, but say nothing of them either
        raise BmcMapError("it is not JSON") from None
    if not isinstance(data, dict) or not data:
        raise BmcMapError("it is not a JSON object with at least one entry")
    return {str(key): _entry(str(key), value) for key, value in data.items()}


def bmc_for(path: str, key: str) -> Bmc:
    """The entry for `key`, read from the file now; BmcMapError when there is none or the file is unusable."""
    found = read_bmc_map(path).get(key)
    if found is None:
        raise BmcMapError("it has no entry for this node")
    return found
