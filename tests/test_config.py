"""Settings: the flag<->env rule, defaults, and a clear exit 2 on every bad value, before any API call."""

from __future__ import annotations

import pytest

from rwo_failover import settings as config
from rwo_failover.model.matchers import LabelSelector, MatcherError, TaintSpec
from rwo_failover.run.exitcodes import EXIT_CONFIG

BAD_VALUES = {
    "DRY_RUN": ["", "maybe", "2"],
    "LEADER_ELECTION": ["", "maybe"],
    "RECOVERY_TIMEOUT_SECONDS": ["", "0", "x", "604801"],
    "UNDO": ["", "reboot", "none", "bmc,operator"],
    "METRICS_PORT": ["", "-1", "70000", "http"],
    "PUSHGATEWAY_URL": ["pushgateway:9091", "ftp://x"],
    "PUSHGATEWAY_INSTANCE": ["", "has space", "a/b"],
    "FENCING": ["", "stonith"],
    "NETWORK_FENCE_CLASS": ["Bad Class"],
    "FENCE_WEBHOOK_URL": ["http://fencer.example", "not a url", "https://"],
    "FENCE_WEBHOOK_TOKEN_FILE": ["/nonexistent/token"],
    "FENCE_WEBHOOK_CA_FILE": ["/nonexistent/ca.crt", "/dev/null"],
    "FENCED_MIN_NOT_READY_SECONDS": ["", "x", "-1", "86401"],
    "REDFISH_BMC_FILE": ["/nonexistent/bmc.json", "/dev/null"],
    "REDFISH_NODE_LABEL": ["bad key!", "a/b/c", "-x"],
    "REDFISH_SILENT_SECONDS": ["", "4", "x", "3601"],
    "REDFISH_POWER_OFF": ["", "maybe"],
    "REDFISH_OFF_WAIT_SECONDS": ["", "0", "601"],
    "LEADER_ELECTION_LEASE_SECONDS": ["", "2", "x", "301"],
    "LEADER_ELECTION_NAMESPACE": ["", "Bad_NS", "a/b"],
    "LEADER_ELECTION_LEASE_NAME": ["", "Has Space", "UPPER"],
    "RECOVERY_NAMESPACE": ["", "Bad_NS", "a/b"],
    "SHUTDOWN_TAINTS": ["", ",", "bad key!", "a=b:Sometimes", "-leading=x", "k=v=w",
                        # on every NotReady node, a partitioned one too: never evidence of a shutdown
                        "node.kubernetes.io/unreachable", "x,node.kubernetes.io/not-ready:NoExecute"],
    "MIN_NOT_READY_SECONDS": ["", "x", "-1", "1.5", "86401", "0"],
    "MAX_UNHEALTHY_FRACTION": ["", "half", "0", "-0.1", "1.01", "nan", "1"],
    "MAX_NODES_PER_PASS": ["", "five", "0", "-3"],
    "STORM_COOLDOWN_SECONDS": ["", "soon", "-1", "1.5", "86401"],
    "MAX_PODS_PER_PASS": ["", "1e3", "0"],
    "STUCK_POD_STATES": ["", "Terminating,Zombie", ","],
    "INCLUDE_NAMESPACES": ["Prod", "a b", "-x"],
    "EXCLUDE_NAMESPACES": ["UPPER", "ns_with_underscore"],
    "POD_SELECTOR": ["app in (a", "app=,", "=x", "app in a,b)", "a b c"],
    "PASS_TIMEOUT_SECONDS": ["", "0", "-5", "soon", "99999"],
    "REQUEST_TIMEOUT_SECONDS": ["", "0", "301"],
    "API_MAX_ATTEMPTS": ["", "0", "three"],
    "PAGE_SIZE": ["", "0", "-1"],
    "LOG_FORMAT": ["", "xml"],
    "LOG_LEVEL": ["", "LOUD"],
    "OUTPUT": ["", "yaml"],
    "OUT_OF_SERVICE_TAINT": ["", "sometimes", "yes"],
    "RECOVERY_SECONDS": ["", "-1", "soon", "2.5", "86401"],
    "INTERVAL": ["", "-5", "fast", "100000"],
    "ONCE_WAIT_SECONDS": ["", "-1", "soon", "1.5", "3601"],
    "WATCH": ["", "maybe", "2"],
    "WATCH_STALE_SECONDS": ["", "4", "soon", "1.5", "601", "10000000000"],
    "RELIST_SECONDS": ["", "29", "-1", "often", "86401"],
    "ALLOW_UNSAFE": ["everything", "unhealthy-fraction,brakes"],
}


def test_every_setting_has_bad_values_listed():
    settable = {s.name for s in config.SPECS} - {"KUBECONFIG", "KUBE_CONTEXT"}
    assert settable == set(BAD_VALUES)


@pytest.mark.parametrize("name, value", [(n, v) for n, vs in BAD_VALUES.items() for v in vs])
def test_bad_env_value_exits_2_with_one_line_naming_it_before_any_api_call(run_pass, name, value):
    result = run_pass(**{name: value})
    assert result.code == EXIT_CONFIG
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and name in lines[0] and "allowed:" in lines[0]
    assert result.requests == [], "no API call may happen with a bad setting"


@pytest.mark.parametrize("name, value", [("MAX_NODES_PER_PASS", "0"), ("SHUTDOWN_TAINTS", "x:Nope")])
def test_bad_flag_value_names_the_flag(run_pass, name, value):
    spec = config.BY_NAME[name]
    result = run_pass(f"{spec.flag}={value}")
    assert result.code == EXIT_CONFIG and spec.flag in result.stderr


def test_contradictory_namespace_filters_exit_2(run_pass):
    result = run_pass(INCLUDE_NAMESPACES="prod,staging", EXCLUDE_NAMESPACES="staging")
    assert result.code == EXIT_CONFIG
    assert "INCLUDE_NAMESPACES" in result.stderr and "EXCLUDE_NAMESPACES" in result.stderr
    assert "staging" in result.stderr


def test_request_timeout_above_pass_timeout_is_contradictory(run_pass):
    result = run_pass(REQUEST_TIMEOUT_SECONDS="30", PASS_TIMEOUT_SECONDS="10")
    assert result.code == EXIT_CONFIG and "REQUEST_TIMEOUT_SECONDS" in result.stderr


def test_flag_beats_env_beats_default():
    _, settings = config.load(["--max-nodes-per-pass", "7"], {"MAX_NODES_PER_PASS": "3", "MAX_PODS_PER_PASS": "9"})
    assert settings.max_nodes_per_pass == 7 and settings.max_pods_per_pass == 9
    assert settings.min_not_ready_seconds == 3


def test_mechanical_naming_rule_holds_for_every_setting():
    for spec in config.SPECS:
        assert spec.flag == "--" + spec.name.lower().replace("_", "-")
        assert spec.field in config.Settings.__dataclass_fields__


def test_defaults_match_the_documented_behaviour():
    _, s = config.load([], {})
    assert [str(t) for t in s.shutdown_taints] == ["node.kubernetes.io/out-of-service",
                                                    "node.cloudprovider.kubernetes.io/shutdown"]
    assert (s.min_not_ready_seconds, s.max_unhealthy_fraction, s.max_nodes_per_pass, s.max_pods_per_pass) == \
        (3, 0.5, 5, 50)
    assert s.stuck_pod_states == frozenset({"Terminating", "Unknown", "NodeLost", "NotReady", "NotStarted"})
    assert s.dry_run is False and s.exclude_namespaces == frozenset({"kube-system"})


def test_empty_list_settings_mean_none():
    _, s = config.load([], {"EXCLUDE_NAMESPACES": "", "POD_SELECTOR": "", "INCLUDE_NAMESPACES": ""})
    assert s.exclude_namespaces == frozenset() and not s.pod_selector and s.include_namespaces == frozenset()


def test_states_are_case_insensitive():
    _, s = config.load([], {"STUCK_POD_STATES": "terminating, nodelost"})
    assert s.stuck_pod_states == frozenset({"Terminating", "NodeLost"})


@pytest.mark.parametrize("text, taint, expected", [
    ("node.kubernetes.io/out-of-service", {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown",
                                            "effect": "NoExecute"}, True),
    ("k=v", {"key": "k", "value": "v", "effect": "NoSchedule"}, True),
    ("k=v", {"key": "k", "value": "w", "effect": "NoSchedule"}, False),
    ("k:NoExecute", {"key": "k", "effect": "NoSchedule"}, False),
    ("k=:NoSchedule", {"key": "k", "effect": "NoSchedule"}, True),
    ("k=:NoSchedule", {"key": "k", "value": "x", "effect": "NoSchedule"}, False),
    ("k", {"key": "other"}, False),
])
def test_taint_spec_matching(text, taint, expected):
    assert TaintSpec.parse(text).matches(taint) is expected


@pytest.mark.parametrize("selector, labels, expected", [
    ("", {}, True),
    ("app=db", {"app": "db"}, True),
    ("app==db", {"app": "web"}, False),
    ("app!=db", {}, True),
    ("app in (db, cache)", {"app": "cache"}, True),
    ("app notin (db)", {"app": "db"}, False),
    ("app notin (db)", {}, True),
    ("tier", {"tier": ""}, True),
    ("!tier", {"tier": "x"}, False),
    ("app=db,tier in (a,b),!legacy", {"app": "db", "tier": "b"}, True),
    ("example.com/team=x", {"example.com/team": "x"}, True),
])
def test_label_selector_matching(selector, labels, expected):
    assert LabelSelector.parse(selector).matches(labels) is expected


@pytest.mark.parametrize("text", ["app in (a", "app)", "a b", "=x", "app=a b", "in (x)"])
def test_label_selector_rejects_malformed(text):
    with pytest.raises(MatcherError):
        LabelSelector.parse(text)
