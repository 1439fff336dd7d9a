"""Safety and consistency checks on a whole Settings: combinations that no single value's parser can see."""

from __future__ import annotations

import math

from .bmc import BMC_MAP_ALLOWED, BmcMapError, check_cas, read_bmc_map
from .errors import ConfigError
from .one_shot import FIRST_PASS_SECONDS, START_MARGIN_SECONDS, accepted, off_wait, own_wait, pass_timeout_needed
from .table import Settings
from .tokens import TOKEN_ALLOWED, TokenError, read_bearer_token
from .unsafe import check_unsafe


def check_settings(settings: Settings, once: bool) -> None:
    """Every check on a whole Settings; ConfigError names the first one that fails. `once` is --once."""
    _check_consistent(settings)
    _check_fencing(settings)
    check_unsafe(settings)
    if once or not settings.interval:
        _check_one_shot(settings)
    if settings.leader_election and (once or not settings.interval):
        raise ConfigError("LEADER_ELECTION=true needs continuous mode; allowed: INTERVAL > 0 without --once")
    if settings.leader_election and settings.dry_run:
        # The Lease is the one write a dry run would still make, and a dry-run replica that takes it
        # switches failover off for the real one, silently.
        raise ConfigError("DRY_RUN=true with LEADER_ELECTION=true would let a replica that changes nothing hold "
                          "the leader Lease; allowed: one of them, not both")


def _check_one_shot(settings: Settings) -> None:
    """A one-shot run (a CronJob's) is a new process: it proves a node down only after seeing it NotReady for the
    wait itself (and, to power a machine off, its Lease silent), inside PASS_TIMEOUT_SECONDS less the third kept for
    acting, after a first pass of up to FIRST_PASS_SECONDS (one_shot.py, the run's own arithmetic). A wait that
    cannot fit there would have every run exit 1 and never fail anything over."""
    if accepted(settings):
        return
    wait, margin = own_wait(settings), FIRST_PASS_SECONDS + START_MARGIN_SECONDS
    needed = math.ceil(pass_timeout_needed(settings, used=margin, wait=wait))
    kept = f", less the {off_wait(settings):g}s kept for the BMC's Off after a ForceOff" if off_wait(settings) else ""
    raise ConfigError(
        f"MIN_NOT_READY_SECONDS={settings.min_not_ready_seconds} cannot pass within one run: a one-shot run "
        f"waits {wait:g}s to see a node down itself, after a first pass of up to {FIRST_PASS_SECONDS:g}s, "
        f"within PASS_TIMEOUT_SECONDS={settings.pass_timeout_seconds:g} less the third kept for acting{kept}, so a "
        "run whose first pass takes that long could never fail a node over; allowed: PASS_TIMEOUT_SECONDS of at "
        f"least {needed} for this wait, a shorter wait, or continuous mode")


def _check_consistent(settings: Settings) -> None:
    both = settings.include_namespaces & settings.exclude_namespaces
    if both:
        raise ConfigError(
            f"INCLUDE_NAMESPACES and EXCLUDE_NAMESPACES both name {', '.join(sorted(both))}; "
            "allowed: disjoint lists")
    if settings.leader_election and settings.leader_election_lease_seconds <= settings.request_timeout_seconds + 2:
        raise ConfigError(
            f"LEADER_ELECTION_LEASE_SECONDS={settings.leader_election_lease_seconds} leaves no time to write: a "
            f"leader starts a write only while its Lease outlives REQUEST_TIMEOUT_SECONDS="
            f"{settings.request_timeout_seconds:g} plus a second; allowed: a lease longer than the request "
            "timeout + 2 s")
    if settings.request_timeout_seconds > settings.pass_timeout_seconds:
        raise ConfigError(
            f"REQUEST_TIMEOUT_SECONDS={settings.request_timeout_seconds:g} exceeds "
            f"PASS_TIMEOUT_SECONDS={settings.pass_timeout_seconds:g}; allowed: a request timeout <= the pass timeout")


def _check_fencing(settings: Settings) -> None:
    if settings.fencing == "networkfence" and not settings.network_fence_class:
        raise ConfigError("FENCING=networkfence needs NETWORK_FENCE_CLASS; allowed: a NetworkFenceClass name")
    if settings.fencing == "webhook" and not settings.fence_webhook_url:
        raise ConfigError("FENCING=webhook needs FENCE_WEBHOOK_URL; allowed: an https:// URL")
    if settings.fencing == "redfish" or settings.redfish_bmc_file:
        _check_redfish(settings)
    if settings.undo == "bmc" and settings.fencing != "redfish":
        raise ConfigError(f"UNDO=bmc needs FENCING=redfish, the only mode with a BMC to see the machine power-cycled "
                          f"(FENCING={settings.fencing}); allowed: UNDO=bootid or operator")
    if settings.fence_webhook_ca_file:
        try:
            with open(settings.fence_webhook_ca_file, "rb"):
                pass
        except OSError as err:
            raise ConfigError(f"FENCE_WEBHOOK_CA_FILE={settings.fence_webhook_ca_file!r} is invalid "
                              f"({err.strerror}); allowed: a readable file") from None
    if settings.fence_webhook_token_file:
        try:
            read_bearer_token(settings.fence_webhook_token_file)
        except TokenError as err:
            raise ConfigError(f"FENCE_WEBHOOK_TOKEN_FILE={settings.fence_webhook_token_file!r} is invalid ({err}); "
                              f"allowed: {TOKEN_ALLOWED}") from None


def _check_redfish(settings: Settings) -> None:
    if not settings.redfish_bmc_file:
        raise ConfigError(f"FENCING=redfish needs REDFISH_BMC_FILE; allowed: {BMC_MAP_ALLOWED}")
    try:
        check_cas(read_bmc_map(settings.redfish_bmc_file))
    except BmcMapError as err:  # names the key and the field, never a value: the file holds passwords
        raise ConfigError(f"REDFISH_BMC_FILE={settings.redfish_bmc_file!r} is invalid ({err}); allowed: "
                          f"{BMC_MAP_ALLOWED}") from None
