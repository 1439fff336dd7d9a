"""FENCING=redfish: a node's BMC, over Redfish, as the witness of its death.

Only a BMC that answers its ComputerSystem's PowerState "Off" proves the node down. Anything else (On,
PoweringOff, no answer, a slow one, 401/403, a redirect, an answer that is not a ComputerSystem) is "not
proven", never an action. With REDFISH_POWER_OFF a node that is On is first powered off (ComputerSystem.Reset,
ResetType ForceOff, through the Writer: dry run and the guard apply), then asked again every second until it
answers Off, for at most REDFISH_OFF_WAIT_SECONDS and never into the third of the pass kept for acting.

Why plain HTTP through kube/deadline_http.py, not sushy or the DMTF redfish library: both sit on requests,
which bounds each socket read but not an answer's total time (a BMC trickling bytes keeps a call alive past
any deadline), reads an answer of any size, and follows redirects, resending Basic credentials to a redirect on
the same host. Three calls (GET the system, POST its Reset action, GET it again) need none of their discovery.
Here each call ends by min(REQUEST_TIMEOUT_SECONDS, what is left of the pass), status line and headers
included; a 3xx is never followed; an answer larger than MAX_ANSWER_BYTES is refused; TLS is always verified
(the entry's CA, or the system's). No message holds the BMC's address, user or password.

Every answer must also be the machine the BMC map names for the node: the ComputerSystem's UUID (and SerialNumber,
when the entry names one) equal to the entry's, else it proves nothing and nothing is powered off. The identity
comes from the operator's map, never from the node: its status.nodeInfo.systemUUID is its kubelet's to write, and
is only checked against the map, for an honest mistake (a name re-registered on another machine).
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

from ..kube.deadline_http import DeadlineHTTPS
from ..model import Json
from ..model.names import same_uuid
from ..settings import Bmc, Settings

MAX_ANSWER_BYTES = 1 << 20  # a ComputerSystem is a few KB
PAST_DEADLINE = "no complete answer from the BMC before the call's deadline"
RESET_ACTION = "#ComputerSystem.Reset"
Remaining = Callable[[], float]


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx comes back as an HTTPError: never followed, so the credentials go to the configured BMC only."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _context(bmc: Bmc) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=bmc.ca) if bmc.ca else ssl.create_default_context()


def _call(bmc: Bmc, method: str, url: str, *, body: Json | None, settings: Settings,
          remaining: Remaining) -> tuple[int, bytes]:
    """One request, ended by the call's own deadline; (status, body) of any answer that is HTTP, 3xx included.
    Raises _Unproven with a reason that names no address and no credential."""
    ends = time.monotonic() + min(settings.request_timeout_seconds, max(0.0, remaining()))
    left: Remaining = lambda: min(ends - time.monotonic(), remaining())  # noqa: E731 - the call's and the pass's
    if left() <= 0:
        raise _Unproven("no time left in the pass to ask the BMC")
    auth = base64.b64encode(f"{bmc.username}:{bmc.password}".encode()).decode()
    headers = {"Accept": "application/json", "Authorization": f"Basic {auth}", "User-Agent": "rwo-failover"}
    data = None
    if body is not None:
        data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        opener = urllib.request.build_opener(DeadlineHTTPS(_context(bmc), left(), left, past=PAST_DEADLINE),
                                             _NoRedirects())
        with opener.open(request, timeout=max(0.05, left())) as answer:
            raw = answer.read(MAX_ANSWER_BYTES + 1)
            status = answer.status
    except urllib.error.HTTPError as err:
        return err.code, b""
    except ssl.SSLError as err:
        raise _Unproven(f"TLS verification of the BMC failed ({err.reason or type(err).__name__})") from None
    except urllib.error.URLError as err:
        if isinstance(err.reason, ssl.SSLError):
            raise _Unproven(f"TLS verification of the BMC failed ({err.reason.reason or 'SSLError'})") from None
        raise _Unproven(f"the BMC cannot be reached ({_kind(err.reason)})") from None
    except (TimeoutError, OSError) as err:
        raise _Unproven(f"the BMC did not answer in time ({_kind(err)})") from None
    except (http.client.HTTPException, ValueError) as err:
        raise _Unproven(f"the BMC's answer is not valid HTTP ({type(err).__name__})") from None
    if len(raw) > MAX_ANSWER_BYTES:
        raise _Unproven(f"the BMC's answer is larger than {MAX_ANSWER_BYTES} bytes")
    return status, raw


def _kind(err: object) -> str:
    """An error's kind and its OS wording, never its arguments: a name-resolution error quotes the host."""
    if isinstance(err, OSError) and err.strerror and not isinstance(err, ssl.SSLError):
        return f"{type(err).__name__}: {err.strerror}"
    if isinstance(err, TimeoutError) and str(err) == PAST_DEADLINE:
        return PAST_DEADLINE
    return type(err).__name__


class _Unproven(Exception):
    """Why the BMC's answer proves nothing; safe to log."""


def _refused(status: int, what: str) -> _Unproven:
    if status in (401, 403):
        return _Unproven(f"the BMC refused the credentials (HTTP {status}) {what}")
    if 300 <= status <= 399:
        return _Unproven(f"the BMC answered HTTP {status}, a redirect, {what}: redirects are never followed")
    return _Unproven(f"the BMC answered HTTP {status} {what}")


def _not_the_machine(system: Json, bmc: Bmc, node_uuid: str) -> str | None:
    """Why the ComputerSystem is not the machine the map entry names (its uuid and serial: the operator's word),
    or None when it is. The node's own systemUUID, which its kubelet writes, must name that machine too: a check
    against an honest mistake (a name re-registered on another machine), never proof. Nothing is quoted: a BMC's
    system path often holds its UUID, and no message holds the address."""
    if bmc.uuid and same_uuid(system.get("UUID")) != bmc.uuid:
        return "the BMC's ComputerSystem UUID is not the uuid REDFISH_BMC_FILE names for this node: another machine " \
               "(the entry names another machine's BMC)"
    serial = system.get("SerialNumber")
    if bmc.serial and (not isinstance(serial, str) or serial.strip() != bmc.serial):
        return "the BMC's ComputerSystem SerialNumber is not the serial REDFISH_BMC_FILE names for this node: " \
               "another machine (the entry names another machine's BMC)"
    if bmc.uuid and same_uuid(node_uuid) != bmc.uuid:
        return "the node's status.nodeInfo.systemUUID is not the uuid REDFISH_BMC_FILE names for it (the name " \
               "re-registered on another machine, or a stale map entry)"
    return None


def _system(bmc: Bmc, settings: Settings, remaining: Remaining, *, node_uuid: str) -> Json:
    status, raw = _call(bmc, "GET", bmc.endpoint, body=None, settings=settings, remaining=remaining)
    if status != 200:
        raise _refused(status, "to the power-state read")
    try:
        system = json.loads(raw)
    except (ValueError, RecursionError):
        raise _Unproven("the BMC's answer is not JSON") from None
    if not isinstance(system, dict) or not isinstance(system.get("PowerState"), str):
        raise _Unproven("the BMC's answer is not a ComputerSystem with a PowerState")
    odata_id = system.get("@odata.id")  # iLO writes it with a trailing "/"
    if not isinstance(odata_id, str) or odata_id.rstrip("/") != _path(bmc):  # another machine's answer
        raise _Unproven("the BMC's answer is not the entry's ComputerSystem (its @odata.id is another path)")
    other = _not_the_machine(system, bmc, node_uuid)
    if other:
        raise _Unproven(f"its BMC answers PowerState {system['PowerState'][:40]}, but {other}")
    return system


def _path(bmc: Bmc) -> str:
    return urlsplit(bmc.endpoint).path.rstrip("/")


def power_state(bmc: Bmc, settings: Settings, remaining: Remaining, *,
                node_uuid: str) -> tuple[str | None, Json, str]:
    """(PowerState, the ComputerSystem, "") as the BMC answers now for the machine the map entry names (which
    `node_uuid`, the node's own word, must name too); (None, {}, why) when it does not, or answers for another
    machine."""
    try:
        system = _system(bmc, settings, remaining, node_uuid=node_uuid)
    except _Unproven as err:
        return None, {}, str(err)
    return system["PowerState"][:40], system, ""


def reset_url(bmc: Bmc, system: Json) -> str:
    """Where ForceOff is POSTed: the system's own Reset action target, which must be a path under the
    system's own, on the same BMC (an absolute URL elsewhere would take the credentials there; another
    system's target would power off another machine); by default the standard path."""
    action = (system.get("Actions") or {}).get(RESET_ACTION) if isinstance(system.get("Actions"), dict) else None
    target = action.get("target") if isinstance(action, dict) else None
    parts = urlsplit(bmc.endpoint)
    if isinstance(target, str) and target.startswith(_path(bmc) + "/") and \
            not any(part in target for part in ("//", "/.", "%", "?", "#", "\\")):  # no way out of that path
        return urlunsplit((parts.scheme, parts.netloc, target, "", ""))
    return bmc.endpoint.rstrip("/") + "/Actions/ComputerSystem.Reset"


def force_off(bmc: Bmc, system: Json, settings: Settings, *, remaining: Remaining) -> tuple[bool, str]:
    """POST ResetType ForceOff; (True, "") when the BMC accepted it (2xx), else (False, why)."""
    try:
        status, _ = _call(bmc, "POST", reset_url(bmc, system), body={"ResetType": "ForceOff"}, settings=settings,
                          remaining=remaining)
    except _Unproven as err:
        return False, str(err)
    if 200 <= status <= 299:
        return True, ""
    return False, str(_refused(status, "to ForceOff"))


def await_off(bmc: Bmc, settings: Settings, remaining: Remaining, *, sleep: Callable[[float], None],
              budget: float, node_uuid: str) -> tuple[bool, str]:
    """Ask every second until the BMC answers Off, for at most `budget` seconds, and at least once whatever the
    budget (REDFISH_OFF_WAIT_SECONDS=1 once asked never: the machine was off, the pass failed): (True, "") or
    (False, why). No time left in the pass (a budget of 0 or less) asks nothing."""
    started, state, why = time.monotonic(), None, "no time left in the pass to wait for Off"
    polls = int(budget) if budget >= 1 else (1 if budget > 0 else 0)
    for _ in range(polls):
        sleep(min(1.0, budget))
        state, _, why = power_state(bmc, settings, remaining, node_uuid=node_uuid)
        if state == "Off":
            return True, ""
        if time.monotonic() - started >= budget:
            break
    waited = time.monotonic() - started
    last = f"PowerState {state}" if state else why
    return False, f"asked for ForceOff; after {waited:.0f}s the BMC still does not answer Off ({last})"
