"""The BMC map of FENCING=redfish (REDFISH_BMC_FILE): which BMC answers for which node, with what credentials.

The file is a Secret key mounted as a file: a JSON object from a key (the node's name, or the value of its
REDFISH_NODE_LABEL label) to {"endpoint", "username", "password", "uuid"?, "serial"?, "ca"?}. `endpoint` is the
https:// URL of the node's ComputerSystem resource (/redfish/v1/Systems/<id>), without user:password@; `uuid`
and `serial` are the machine's identity as its BMC reports it (the ComputerSystem's UUID and SerialNumber), at
least one of them: the operator's word for which machine answers, since a node's own status.nodeInfo.systemUUID
is written by its kubelet. A UUID that firmware leaves unset (all zeros, all ones, a board maker's fixed default)
or that two entries share identifies no one machine and is refused: give `serial` for such boards. `ca` is an
optional PEM bundle that verifies the BMC's certificate (else the system's CAs). It is read at start-up (exit 2
naming what is wrong) and again before each call, so a rotated password is picked up. No message ever quotes the
file, an endpoint, a user name or a password: BmcMapError names the key and the field, never a value.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field

from ..model.names import same_uuid
from .urls import check_url

MAX_MAP_BYTES = 4 * 1024 * 1024
BMC_MAP_ALLOWED = ('a readable JSON file: {"<node name or label value>": {"endpoint": "https://...", "username": '
                   '"...", "password": "...", "uuid": "<the machine\'s SMBIOS UUID>" and/or "serial": "<its serial '
                   'number>", "ca": "<PEM, optional>"}}, each uuid a machine\'s own')
class BmcMapError(ValueError):
    """A BMC map that cannot be used; the message names what is wrong, never a value from the file."""


@dataclass(frozen=True)
class Bmc:
    endpoint: str = field(repr=False)
    username: str = field(repr=False)
    password: str = field(repr=False)
    ca: str | None = field(default=None, repr=False)
    uuid: str = field(default="", repr=False)  # same_uuid() form; "" when the entry names a serial only
    serial: str = field(default="", repr=False)

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
    uuid, serial = raw.get("uuid"), raw.get("serial")
    if uuid is None and serial is None:
        raise BmcMapError(f"{where} has neither uuid nor serial: the identity of the machine its BMC must answer "
                          "for, which no node may tell about itself")
    if uuid is not None and not same_uuid(uuid):
        raise BmcMapError(f"{where} has a uuid that is not a UUID one machine alone carries (all zeros, all ones "
                          "and firmware defaults are shared by many: give serial instead)")
    if serial is not None and (not isinstance(serial, str) or not serial.strip() or len(serial) > 256):
        raise BmcMapError(f"{where} has a serial that is not a non-empty string of at most 256 characters")
    try:
        endpoint = check_url(raw["endpoint"], ("https",), userinfo_ok=False)
    except ValueError as err:
        raise BmcMapError(f"{where} has an endpoint that is not an https:// URL ({err})") from None
    if "?" in endpoint or "#" in endpoint or "/redfish/v1/" not in endpoint:
        raise BmcMapError(f"{where} has an endpoint that is not a Redfish ComputerSystem URL "
                          "(https://host/redfish/v1/Systems/<id>, no query)")
    return Bmc(endpoint, raw["username"], raw["password"], ca, same_uuid(uuid) if uuid is not None else "",
               serial.strip() if isinstance(serial, str) else "")


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
    entries = {str(key): _entry(str(key), value) for key, value in data.items()}
    seen: dict[str, str] = {}
    for key, bmc in entries.items():
        for identity in (f"uuid {bmc.uuid}", f"serial {bmc.serial}") if bmc.uuid and bmc.serial else \
                ((f"uuid {bmc.uuid}",) if bmc.uuid else (f"serial {bmc.serial}",)):
            if identity in seen:
                first = seen[identity]
                raise BmcMapError(f"entries {_where(first)} and {_where(key)} name the same {identity.split()[0]}: "
                                  "one machine's identity cannot answer for two entries")
            seen[identity] = key
    return entries


def _where(key: str) -> str:
    return repr(key) if len(key) <= 63 and key.isprintable() else "(an entry)"


_PEM = re.compile(r"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", re.DOTALL)


def _certificates(pem: str) -> bool:
    """Each PEM block decodes to DER (a SEQUENCE), and there is one at least: the markers alone prove nothing.
    Parsed here without ssl (the planner imports settings, and may not import ssl); TLS loads it for real."""
    blocks = _PEM.findall(pem)
    try:
        return bool(blocks) and all(base64.b64decode("".join(b.split()), validate=True)[:1] == b"\x30"
                                    for b in blocks)
    except (binascii.Error, ValueError):
        return False


def check_cas(entries: dict[str, Bmc]) -> None:
    """At start-up: every entry's ca holds certificates, else BmcMapError naming the entry, so a bad one is
    not found out at the first outage."""
    for key, bmc in entries.items():
        if bmc.ca is not None and not _certificates(bmc.ca):
            where = f"entry {key!r}" if len(key) <= 63 and key.isprintable() else "an entry"
            raise BmcMapError(f"{where} has a ca that holds no PEM certificate")


def bmc_for(path: str, key: str) -> Bmc:
    """The entry for `key`, read from the file now; BmcMapError when there is none or the file is unusable."""
    found = read_bmc_map(path).get(key)
    if found is None:
        raise BmcMapError("it has no entry for this node")
    return found
