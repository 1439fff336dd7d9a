"""FENCING=redfish against a real Redfish server: sushy-tools' emulator (its fake driver) started on 127.0.0.1
by the tests (rwo_testkit/redfish_bmc.py), the fixture API server, the real client.

A node whose Lease went silent (before NotReady, with no shutdown taint) is freed only when its BMC answers
PowerState Off, or answers On, is powered off (REDFISH_POWER_OFF=true) and then answers Off. A BMC that
answers On with power-off disabled, answers nothing, answers slowly, refuses the credentials, redirects or
answers junk: nothing is freed, the reason is logged, and no address or credential is.
"""

from __future__ import annotations

import io
import json
import time

import pytest
from conftest import SESSION_LOG, Run, plant
from helpers import detached

from rwo_failover.run.cli import main
from rwo_failover.run.exitcodes import EXIT_FAILED, EXIT_OK
from rwo_testkit import fake_cluster as fc
from rwo_testkit.redfish_bmc import PASSWORD, USER, RedfishEmulator, SilentBmc, SlowBmc, _RawTLS

SILENT = "silent"


@pytest.fixture(scope="module")
def bmc():
    with RedfishEmulator({"off": "Off", "on": "On", "on-poweroff": "On", "brake-a": "On", "brake-b": "On",
                          "brake-c": "On"}) as emulator:
        yield emulator


def silent_node(api, name: str = SILENT, silent_for: float = 30, pods: tuple[str, ...] = ("db-0",),
                machine: str = "") -> None:
    """A node still Ready=True (the grace has not run out), no taint, its Lease unrenewed `silent_for`
    seconds, holding a Running, Ready pod with an attached RWO claim: what a power cut looks like at 30 s.
    It runs on the emulator's system `machine` (its systemUUID is that system's UUID), by default on its own."""
    api.add(fc.node(name, ready="True", since=3600, machine=machine or None))
    api.add(fc.lease(name, silent_for))
    for pod in pods:
        fc.add_volume(api, f"data-{pod}", attached_to=name)
        api.add(fc.pod(pod, name, claims=[f"data-{pod}"], ready="True"))


def cluster(api, live: int = 4, **silent) -> None:
    for i in range(live):
        fc.live_node(api, f"w{i}")
    silent_node(api, **silent)


def bmc_file(tmp_path, entries: dict) -> str:
    path = tmp_path / "bmc.json"
    path.write_text(json.dumps(entries))
    plant(PASSWORD)
    return str(path)


def untouched(api) -> bool:
    return not [r for r in api.requests if (r.verb, r.resource) in
                (("delete", "pods"), ("delete", "volumeattachments"), ("patch", "nodes"))]


def freed(api, node: str = SILENT, pod: str = "db-0") -> bool:
    oos = [t for t in api.get("nodes", node)["spec"].get("taints", [])
           if t["key"] == "node.kubernetes.io/out-of-service"]
    return api.get("pods", pod, "default") is None and not detached(api) and bool(oos)


def refusal(api, node: str = SILENT) -> str:
    [message] = [e["message"] for e in api.objects("events")
                 if e["reason"] == "FencingFailed" and e["involvedObject"]["name"] == node]
    return message


def no_secret(result: Run, api, *also: str) -> None:
    text = json.dumps(result.logs) + result.stderr + json.dumps(api.objects("events"))
    for secret in (PASSWORD, USER, *also):
        assert secret not in text, f"{secret!r} leaked"


def redfish_pass(run_pass, path: str, **env: str) -> Run:
    if env.get("REDFISH_POWER_OFF") == "true":  # a one-shot run's Lease watch and Off wait need it (one_shot.py)
        env.setdefault("PASS_TIMEOUT_SECONDS", "45")
    return run_pass(FENCING="redfish", REDFISH_BMC_FILE=path, **env)


def test_a_bmc_that_answers_off_proves_the_silent_node_down_and_it_is_freed(api, run_pass, tmp_path, bmc):
    cluster(api, machine="off")
    result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: bmc.entry("off")}))

    assert result.code == EXIT_OK, result.logs
    assert freed(api), "pod deleted, attachment released, the out-of-service taint added by us"
    assert result.lines("its BMC answers PowerState Off: proven down")
    no_secret(result, api, bmc.endpoint("off"), bmc.ids["off"])


SAFE_LABEL = "node-restriction.kubernetes.io/bmc"  # NodeRestriction forbids a kubelet to set it on its own Node


def test_a_node_keyed_by_a_label_value(api, run_pass, tmp_path, bmc):
    cluster(api, machine="off")
    node = api.get("nodes", SILENT)
    node["metadata"]["labels"][SAFE_LABEL] = "rack4-u12"
    api.add(node)
    result = redfish_pass(run_pass, bmc_file(tmp_path, {"rack4-u12": bmc.entry("off")}),
                          REDFISH_NODE_LABEL=SAFE_LABEL)

    assert result.code == EXIT_OK and freed(api)


@pytest.mark.parametrize("label", ["bmc.example.com/name", "bmc", "kubernetes.io/hostname",
                                   "node.kubernetes.io/bmc", "topology.kubernetes.io/zone"])
def test_a_label_a_kubelet_may_set_on_itself_is_refused_at_start_up(api, run_pass, tmp_path, bmc, label):
    """Hole 2 of issue 35: the label picks the map entry, and so the machine to power off. Under NodeRestriction a
    kubelet may set any of these on its own Node, the docs' old example bmc.example.com/name included: exit 2,
    naming the key, why, and what to use; before any API call."""
    from rwo_failover.run.exitcodes import EXIT_CONFIG
    cluster(api, machine="off")
    result = redfish_pass(run_pass, bmc_file(tmp_path, {"rack4-u12": bmc.entry("off")}), REDFISH_NODE_LABEL=label)

    assert result.code == EXIT_CONFIG and result.requests == []
    assert f"REDFISH_NODE_LABEL={label}" in result.stderr and "kubelet may set this label" in result.stderr
    assert "node-restriction.kubernetes.io/" in result.stderr and "ALLOW_UNSAFE=kubelet-label" in result.stderr


def test_a_kubelet_label_acknowledged_as_unsafe_runs_and_says_so(api, run_pass, tmp_path, bmc):
    cluster(api, machine="off")
    node = api.get("nodes", SILENT)
    node["metadata"]["labels"]["bmc.example.com/name"] = "rack4-u12"
    api.add(node)
    result = redfish_pass(run_pass, bmc_file(tmp_path, {"rack4-u12": bmc.entry("off")}),
                          REDFISH_NODE_LABEL="bmc.example.com/name", ALLOW_UNSAFE="kubelet-label")

    assert result.code == EXIT_OK and freed(api)
    assert [line for line in result.logs if "kubelet-label" in json.dumps(line) and line["level"] == "WARNING"]


def test_on_with_power_off_disabled_frees_nothing(api, run_pass, tmp_path, bmc):
    cluster(api, machine="on")
    result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: bmc.entry("on")}))

    assert result.code == EXIT_FAILED and untouched(api)
    message = refusal(api)
    assert "PowerState On" in message and "REDFISH_POWER_OFF=false" in message, message
    assert bmc.power("on") == "On", "never powered off without REDFISH_POWER_OFF"
    no_secret(result, api, bmc.endpoint("on"))


def test_on_with_power_off_enabled_is_powered_off_then_freed(api, kubeconfig, tmp_path, bmc):
    """Real sleeps: the fake driver applies ForceOff 1 to 11 s after accepting it, and the pass waits."""
    cluster(api, machine="on-poweroff")
    path = bmc_file(tmp_path, {SILENT: bmc.entry("on-poweroff")})
    environ = {"KUBECONFIG": kubeconfig, "LOG_FORMAT": "json", "PASS_TIMEOUT_SECONDS": "45", "ONCE_WAIT_SECONDS": "0",
               "FENCING": "redfish", "REDFISH_BMC_FILE": path, "REDFISH_POWER_OFF": "true"}
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    code = main(["--once"], environ, stdout=out, stderr=err, sleep=time.sleep)
    took = time.monotonic() - started
    SESSION_LOG.add(out.getvalue())
    SESSION_LOG.add(err.getvalue())
    logs = [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]

    assert code == EXIT_OK, logs
    # A new process first sees the Lease silent, and waits a renewal interval of its own (12 s) before any BMC is
    # told anything (issue 35: no skew between API servers makes a heartbeating kubelet look silent).
    passes = [line for line in logs if line["message"] == "pass finished"]
    assert [p["powered_off"] for p in passes] == [0, 1]
    assert bmc.power("on-poweroff") == "Off"
    assert freed(api)
    assert [e for e in api.objects("events") if e["reason"] == "NodePoweredOff"]
    assert took < 40, f"the run took {took:.1f} s"
    no_secret(Run(code, logs, err.getvalue()), api, bmc.endpoint("on-poweroff"))


def test_a_bmc_that_never_answers_frees_nothing_within_the_request_timeout(api, run_pass, tmp_path):
    cluster(api)
    with SilentBmc() as silent:
        started = time.monotonic()
        result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: silent.entry()}), REQUEST_TIMEOUT_SECONDS="2")
        took = time.monotonic() - started

    assert result.code == EXIT_FAILED and untouched(api)
    assert "did not answer in time" in refusal(api), refusal(api)
    assert took < 2 + 5, f"the pass took {took:.1f} s with REQUEST_TIMEOUT_SECONDS=2"
    no_secret(result, api, silent.entry()["endpoint"])


def test_an_off_trickled_a_byte_at_a_time_is_no_answer(api, run_pass, tmp_path):
    """Each byte well within the per-read timeout, the whole answer ~30 s: the call ends at its own deadline,
    and the Off it would have said is never believed."""
    cluster(api)
    with SlowBmc("Off", trickle=0.3) as slow:
        started = time.monotonic()
        result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: slow.entry()}), REQUEST_TIMEOUT_SECONDS="2")
        took = time.monotonic() - started

    assert result.code == EXIT_FAILED and untouched(api)
    assert "before the call's deadline" in refusal(api), refusal(api)
    assert took < 2 + 5, f"the pass took {took:.1f} s"


def test_refused_credentials_free_nothing_and_are_never_logged(api, run_pass, tmp_path, bmc):
    cluster(api)
    wrong = "wr0ng-" + PASSWORD
    result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: bmc.entry("off", password=wrong)}))
    plant(wrong)

    assert result.code == EXIT_FAILED and untouched(api)
    assert "refused the credentials (HTTP 401)" in refusal(api), refusal(api)
    no_secret(result, api, wrong, bmc.endpoint("off"))


def test_a_bmc_certificate_from_another_ca_is_refused(api, run_pass, tmp_path, bmc):
    cluster(api)
    result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: bmc.entry("off", ca=False)}))

    assert result.code == EXIT_FAILED and untouched(api)
    assert "TLS verification of the BMC failed" in refusal(api), refusal(api)


@pytest.mark.parametrize("reply, why", [
    (b"HTTP/1.1 302 Found\r\nLocation: https://elsewhere.example/redfish/v1/Systems/1\r\nContent-Length: 0\r\n\r\n",
     "a redirect"),
    (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\nPowerState=O", "not JSON"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 67\r\n\r\n"
     b"{\"@odata.id\": \"/redfish/v1/Systems/1\", \"PowerState\": \"PoweringOff\"}", "PowerState PoweringOff"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 21\r\n\r\n{\"PowerState\": \"Off\"}",
     "not the entry's ComputerSystem"),  # no @odata.id: whose Off it is cannot be told
    (b"OFF\r\n\r\n", "not valid HTTP"),
])
def test_anything_but_off_is_not_proof(api, run_pass, tmp_path, reply, why):
    cluster(api)
    with _RawTLS(reply) as junk:
        result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: junk.entry()}))

    assert result.code == EXIT_FAILED and untouched(api)
    assert why in refusal(api), refusal(api)
    assert "elsewhere.example" not in refusal(api)


def test_a_node_with_a_fresh_lease_never_reaches_its_bmc(api, run_pass, tmp_path):
    cluster(api, silent_for=5)
    with SilentBmc() as never:
        result = redfish_pass(run_pass, bmc_file(tmp_path, {SILENT: never.entry()}), REDFISH_POWER_OFF="true",
                              PASS_TIMEOUT_SECONDS="45")  # a one-shot run keeps 12 s for the Off

    assert result.code == EXIT_OK and untouched(api)
    assert never.requests == 0


def test_a_node_without_an_entry_is_not_proven(api, run_pass, tmp_path, bmc):
    cluster(api)
    result = redfish_pass(run_pass, bmc_file(tmp_path, {"another-node": bmc.entry("off")}))

    assert result.code == EXIT_FAILED and untouched(api)
    assert "no entry for this node" in refusal(api), refusal(api)


def test_many_silent_leases_at_once_power_off_nothing_and_free_nothing(api, run_pass, tmp_path, bmc):
    """Three of five nodes silent (a partition looks like this): the brake refuses before any BMC is told."""
    for i in range(2):
        fc.live_node(api, f"w{i}")
    names = ("brake-a", "brake-b", "brake-c")
    for name in names:
        silent_node(api, name, pods=(f"{name}-0",))
    result = redfish_pass(run_pass, bmc_file(tmp_path, {n: bmc.entry(n) for n in names}),
                          REDFISH_POWER_OFF="true", PASS_TIMEOUT_SECONDS="45")

    assert result.code != EXIT_OK and untouched(api)
    assert [bmc.power(n) for n in names] == ["On"] * 3, "nothing powered off"
    assert any("Lease has been silent" in json.dumps(line) for line in result.logs), result.logs


def test_a_bmc_map_that_cannot_be_used_is_refused_at_start_up_without_quoting_it(api, run_pass, tmp_path):
    path = tmp_path / "bmc.json"
    path.write_text(json.dumps({SILENT: {"endpoint": "http://10.0.0.5/redfish/v1/Systems/1", "username": USER,
                                         "password": PASSWORD, "uuid": fc.machine_uuid(SILENT)}}))
    plant(PASSWORD)
    result = redfish_pass(run_pass, str(path))

    assert result.code == 2 and result.requests == []
    assert "REDFISH_BMC_FILE" in result.stderr and "not an https:// URL" in result.stderr
    assert PASSWORD not in result.stderr and "10.0.0.5" not in result.stderr
