"""Settings that would switch a safety rule off, or pass start-up and then fail every pass (issue 28): refused
with exit 2 naming the setting, or accepted only with ALLOW_UNSAFE naming the rule, and a start-up warning
that says what is off."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

from rwo_failover import settings as config
from rwo_failover.run.exitcodes import EXIT_CONFIG, EXIT_OK
from rwo_testkit.fence_server import FenceServer

DURATIONS = [s.name for s in config.SPECS if s.name.endswith("_SECONDS") or s.name == "INTERVAL"]
HUGE = "999999999999"  # passed start-up, then every pass that used it exited 70 on a datetime overflow


def one_config_line(result, *names: str) -> str:
    assert result.code == EXIT_CONFIG, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and all(name in lines[0] for name in names), lines
    assert result.requests == [], "no API call may happen with a bad setting"
    return lines[0]


@pytest.mark.parametrize("name", DURATIONS)
def test_every_duration_has_a_maximum_and_exits_2_above_it(run_pass, name):
    line = one_config_line(run_pass(**{name: HUGE}), name)
    assert re.search(r"(to|,) \d+", config.BY_NAME[name].allowed), "the allowed text must give the maximum"
    assert "allowed:" in line


def test_every_maximum_is_in_the_settings_doc():
    doc = (ROOT / "docs" / "settings.md").read_text()
    table = doc.split("<!-- limits-table", 1)[1].split("<!-- /limits-table -->", 1)[0]
    rows = [tuple(c.strip().strip("`") for c in line.strip("|").split("|")) for line in table.splitlines()
            if line.startswith("| `")]
    assert rows == [(name, config.BY_NAME[name].allowed) for name in DURATIONS]


def test_an_unhealthy_fraction_of_1_that_can_never_brake_is_refused(run_pass):
    line = one_config_line(run_pass(MAX_UNHEALTHY_FRACTION="1"), "MAX_UNHEALTHY_FRACTION", "ALLOW_UNSAFE")
    assert "unhealthy-fraction" in line and "never" in line


@pytest.mark.parametrize("fraction", ["0.95", "0.9"])
def test_a_fraction_just_below_1_that_lets_9_of_10_not_ready_act_is_refused_too(run_pass, fraction):
    """Found attacking the first fix: 0.95 switched the brake off as surely as 1 in any cluster of up to 20
    nodes, silently; the issue's case (9 of 10 nodes not Ready, and a pass acts) holds for 0.9 too."""
    line = one_config_line(run_pass(MAX_UNHEALTHY_FRACTION=fraction), "MAX_UNHEALTHY_FRACTION", "ALLOW_UNSAFE")
    assert "unhealthy-fraction" in line


def test_no_not_ready_wait_without_fencing_is_refused(run_pass):
    line = one_config_line(run_pass(MIN_NOT_READY_SECONDS="0"), "MIN_NOT_READY_SECONDS", "FENCING", "ALLOW_UNSAFE")
    assert "min-not-ready" in line


def test_no_not_ready_wait_with_fencing_needs_no_acknowledgement():
    _, settings = config.load([], {"MIN_NOT_READY_SECONDS": "0", "FENCING": "networkfence",
                                   "NETWORK_FENCE_CLASS": "ceph"})
    assert settings.min_not_ready_seconds == 0


@pytest.mark.parametrize("env, rule, disabled", [
    ({"MAX_UNHEALTHY_FRACTION": "1"}, "unhealthy-fraction", "MAX_UNHEALTHY_FRACTION=1"),
    ({"MIN_NOT_READY_SECONDS": "0"}, "min-not-ready", "MIN_NOT_READY_SECONDS=0"),
    ({"STORM_COOLDOWN_SECONDS": "0"}, "storm-cooldown", "STORM_COOLDOWN_SECONDS=0"),
])
def test_an_acknowledged_unsafe_value_starts_with_a_warning_naming_what_it_disables(run_pass, env, rule, disabled):
    result = run_pass(ALLOW_UNSAFE=rule, **env)
    assert result.code == EXIT_OK
    [warning] = result.lines("safety rule switched off by ALLOW_UNSAFE")
    assert warning["level"] == "WARNING" and warning["rule"] == rule and disabled in warning["disables"]


def test_an_acknowledgement_no_setting_needs_warns_nothing(run_pass):
    result = run_pass(ALLOW_UNSAFE="unhealthy-fraction")
    assert result.code == EXIT_OK and not result.lines("safety rule switched off by ALLOW_UNSAFE")


@pytest.mark.parametrize("content", ["sk-0123456789abcdef\n", "", "-----BEGIN CERTIFICATE-----\nnot base64\n"
                                                                  "-----END CERTIFICATE-----\n"])
def test_a_ca_file_without_a_certificate_is_refused_at_start_up(run_pass, tmp_path, content):
    ca = tmp_path / "ca.crt"
    ca.write_text(content)
    line = one_config_line(run_pass(FENCE_WEBHOOK_CA_FILE=str(ca)), "FENCE_WEBHOOK_CA_FILE")
    assert "certificate" in line and "sk-0123" not in line


def test_a_ca_file_with_certificates_is_accepted():
    with FenceServer() as fencer:
        _, settings = config.load([], {"FENCE_WEBHOOK_CA_FILE": fencer.ca_file})
    assert settings.fence_webhook_ca_file == fencer.ca_file


def test_no_storm_cool_down_needs_its_acknowledgement(run_pass):
    line = one_config_line(run_pass(STORM_COOLDOWN_SECONDS="0"), "STORM_COOLDOWN_SECONDS")
    assert "storm-cooldown" in line and "flapping" in line
