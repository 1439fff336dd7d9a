"""Observability (issue 13): the metric table, the alert rules under the real promtool, the Pushgateway,
the health endpoints, and recovery confirmation with its Events."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from conftest import ROOT, plant
from helpers import real_tool, recovery_records

from rwo_failover.run.exitcodes import EXIT_OK, EXIT_REFUSED
from rwo_failover.run.health import Liveness
from rwo_failover.run.metrics import Metrics, documented
from rwo_testkit import fake_cluster as fc
from rwo_testkit.control_plane import free_port
from rwo_testkit.fence_server import Recorder
from rwo_testkit.raw_reply import RawReply

MONITORING = ROOT / "monitoring"


def test_the_metric_table_matches_the_code():
    doc = (ROOT / "docs" / "monitoring.md").read_text()
    table = doc.split("<!-- metrics-table", 1)[1].split("<!-- /metrics-table -->", 1)[0]
    rows = [[c.strip().strip("`") for c in line.strip("|").split("|")] for line in table.splitlines()
            if line.startswith("| `")]
    assert [(name, kind, labels) for name, kind, labels, _ in rows] == list(documented())


def test_metric_names_follow_prometheus_conventions():
    for name, kind, _labels in documented():
        assert name.startswith("rwo_failover_")
        assert name.endswith("_total") == (kind == "counter")
        assert not re.search(r"_(ms|milliseconds|minutes)\b", name), "base units"


def test_the_prometheusrule_carries_exactly_the_plain_rules():
    plain = yaml.safe_load((MONITORING / "rules.yml").read_text())
    [operator] = [d for d in yaml.safe_load_all((MONITORING / "prometheusrule.yaml").read_text()) if d]
    assert operator["kind"] == "PrometheusRule" and operator["spec"] == plain


def test_promtool_checks_the_rules_and_every_alert_fires_and_clears():
    promtool = real_tool("promtool", "prometheus")
    subprocess.run([promtool, "check", "rules", "rules.yml"], cwd=MONITORING, check=True, capture_output=True)
    tested = subprocess.run([promtool, "test", "rules", "tests.yml"], cwd=MONITORING, capture_output=True, text=True)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    tests = yaml.safe_load((MONITORING / "tests.yml").read_text())["tests"]
    alerts = {r["alert"] for g in yaml.safe_load((MONITORING / "rules.yml").read_text())["groups"] for r in g["rules"]}
    firing = {c["alertname"] for t in tests for c in t["alert_rule_test"] if c["exp_alerts"]}
    quiet = {c["alertname"] for t in tests for c in t["alert_rule_test"] if not c["exp_alerts"]}
    assert firing == alerts == quiet, "every alert is tested both firing and not firing"


def test_every_alert_waits_before_it_pages_and_says_why():
    """Issue 44: five of the eight alerts had no `for:`, two of them critical, so one evaluation paged. Each now
    has one, with a comment right above it saying why it is that long; tests.yml checks each still fires, and
    stays quiet while pending."""
    text = (MONITORING / "rules.yml").read_text()
    rules = [r for g in yaml.safe_load(text)["groups"] for r in g["rules"]]
    assert [r["alert"] for r in rules if not r.get("for")] == []
    assert len(re.findall(r"\n +# [^\n]+\n +for: ", text)) == len(rules)


def test_liveness_fails_when_no_pass_finishes_in_time():
    clock = [100.0]
    live = Liveness(90, monotonic=lambda: clock[0])
    assert live.alive and not live.ready
    clock[0] += 80
    live.progressed()
    assert live.ready and live.alive
    clock[0] += 91
    assert not live.alive, "a hung loop gets restarted"


def test_a_real_pass_pushes_its_metrics_to_a_real_pushgateway(api, run_pass, tmp_path):
    gateway, url = pushgateway(tmp_path)
    try:
        fc.outage(api)
        result = run_pass(PUSHGATEWAY_URL=url, PUSHGATEWAY_INSTANCE="rwo-failover-29000001")
        assert result.code == EXIT_OK and result.lines("pushed metrics to the Pushgateway")
        with urllib.request.urlopen(f"{url}/metrics", timeout=5) as answer:
            text = answer.read().decode()
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
    group = 'instance="rwo-failover-29000001",job="rwo-failover"'
    assert f'rwo_failover_passes_total{{{group},result="ok"}} 1' in text
    assert f"rwo_failover_pods_force_deleted_total{{{group}}} 1" in text
    assert f"rwo_failover_attachments_deleted_total{{{group}}} 1" in text


def test_a_pushgateway_that_is_down_is_a_warning_not_a_failed_pass(api, run_pass):
    fc.outage(api)
    result = run_pass(PUSHGATEWAY_URL=f"http://127.0.0.1:{free_port()}")
    assert result.code == EXIT_OK and api.objects("pods") == []
    [line] = result.lines("could not push metrics to the Pushgateway; the pass itself is unaffected")
    assert line["level"] == "WARNING"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_push_never_follows_a_redirect_nor_takes_its_password_elsewhere(api, run_pass, status):
    """A Pushgateway (or whatever answers at its URL) that redirects: the push is not repeated anywhere, the
    basic-auth password never reaches the other host, and the pass keeps its exit code."""
    password = plant("pushgateway-s3cret")
    with Recorder() as elsewhere, Recorder() as gateway:
        gateway.answer = (status, b"", {"Location": elsewhere.url.replace("127.0.0.1", "localhost")})
        fc.outage(api)
        result = run_pass(PUSHGATEWAY_URL=gateway.url.replace("http://", f"http://ops:{password}@"))
    assert result.code == EXIT_OK and api.objects("pods") == []
    assert elsewhere.requests == [], "the redirect was followed"
    # The read-back of the failover histogram (run/pushed.py), then the push: neither is repeated elsewhere.
    assert [r["method"] for r in gateway.requests] == ["GET", "POST"]
    [line] = result.lines("could not push metrics to the Pushgateway; the pass itself is unaffected")
    assert line["level"] == "WARNING" and str(status) in line["error"] and "redirect" in line["error"]


@pytest.mark.parametrize("reply", [b"HELLO\r\n\r\n", b"HTTP/1.1 2OO OK\r\n\r\n", b""])
def test_a_reply_that_is_not_http_is_one_warning_and_the_pass_keeps_its_code(api, run_pass, reply):
    with RawReply(reply) as gateway:
        fc.outage(api)
        result = run_pass(PUSHGATEWAY_URL=gateway.url)
    assert result.code == EXIT_OK and api.objects("pods") == [] and gateway.requests
    [line] = result.lines("could not push metrics to the Pushgateway; the pass itself is unaffected")
    assert line["level"] == "WARNING" and line["error"]
    assert result.lines("pass finished")


# --- recovery confirmation --------------------------------------------------------------------------------

def stamp(seconds_ago: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def replacement(api, name: str, node: str, ready: bool, ready_ago: float = 5, owner: str = "StatefulSet",
                claim: str = "data-db-0") -> dict:
    pod = fc.pod(name, node, claims=[claim], owner=owner, ready="True" if ready else "False")
    pod["status"]["conditions"][1]["lastTransitionTime"] = stamp(ready_ago)
    return api.replace(pod) if api.get("pods", name, "default") else api.add(pod)


def test_a_freed_claim_is_marked_then_its_recovery_confirmed_with_the_failover_time(api, run_pass):
    fc.outage(api)
    claim = api.get("persistentvolumeclaims", "data-db-0", "default")
    first = run_pass()
    assert first.code == EXIT_OK and api.objects("pods") == []
    [record] = recovery_records(api)
    assert record["pod"] == "db-0" and record["node"] == "dead" and record["controller"].startswith("StatefulSet/")
    assert (record["claim"], record["claimUID"], record["volume"]) == (
        "default/data-db-0", claim["metadata"]["uid"], claim["spec"]["volumeName"])
    assert api.get("persistentvolumeclaims", "data-db-0", "default") == claim, "the tenant's claim is not written"

    replacement(api, "db-0", "w1", ready=False)
    waiting = run_pass()
    assert waiting.summary["recovery_pending"] == 1 and not any(
        e["reason"] == "RWOVolumeRecovered" for e in api.objects("events"))

    replacement(api, "db-0", "w1", ready=True, ready_ago=3)
    api.add(fc.attachment("pv-default-data-db-0", "w1", attached=True))
    done = run_pass()

    assert done.summary["recovered"] == 1
    [event] = [e for e in api.objects("events") if e["reason"] == "RWOVolumeRecovered"]
    assert event["involvedObject"]["kind"] == "PersistentVolumeClaim" and event["type"] == "Normal"
    seconds = int(re.search(r"attached (\d+)s after its node went NotReady", event["message"])[1])
    assert 590 <= seconds <= 610, "the dead node went NotReady 600 s ago; the replacement is Ready now"
    assert re.search(r"of which (\d+)s until rwo-failover freed the volume", event["message"])
    assert recovery_records(api) == [], "the record is settled"


@pytest.mark.parametrize("setup, missing", [
    (lambda api: None, "not scheduled"),
    (lambda api: replacement(api, "db-0", "w1", ready=True), "Multi-Attach: the volume is still attached to node dead"),
    (lambda api: (replacement(api, "db-0", "w1", ready=True),
                  api.add(fc.attachment("pv-default-data-db-0", "w1", attached=False))), "is not attached"),
    (lambda api: (replacement(api, "db-0", "w1", ready=False),
                  api.add(fc.attachment("pv-default-data-db-0", "w1", attached=True))), "not Running and Ready"),
])
def test_no_recovery_within_the_timeout_says_what_is_missing(api, run_pass, setup, missing):
    # The dead node went NotReady 600 s ago: with a NotReady wait of 1800 s it is not proven down again, so the
    # later passes only check the recovery (a one-shot run's wait must fit in 2/3 of its deadline).
    NEVER_AGAIN = {"MIN_NOT_READY_SECONDS": "1800", "PASS_TIMEOUT_SECONDS": "3600"}
    fc.outage(api)
    assert run_pass(OUT_OF_SERVICE_TAINT="never").code == EXIT_OK
    if "Multi-Attach" in missing:  # the old attachment came back (the attach-detach controller re-created it)
        api.add(fc.attachment("pv-default-data-db-0", "dead"))
    setup(api)
    time.sleep(1.1)

    result = run_pass(RECOVERY_TIMEOUT_SECONDS="1", OUT_OF_SERVICE_TAINT="never", **NEVER_AGAIN)

    [event] = [e for e in api.objects("events") if e["reason"] == "RWOVolumeNotRecovered"]
    assert event["type"] == "Warning" and missing in event["message"], event["message"]
    assert result.summary["not_recovered"] == 1
    again = run_pass(RECOVERY_TIMEOUT_SECONDS="1", OUT_OF_SERVICE_TAINT="never", **NEVER_AGAIN)
    assert again.summary["not_recovered"] == 0, "reported once"


def test_a_replacement_of_another_controller_is_not_ours(api, run_pass):
    fc.outage(api)
    run_pass()
    pod = replacement(api, "intruder-1", "w1", ready=True, owner="ReplicaSet")
    assert pod
    api.add(fc.attachment("pv-default-data-db-0", "w1", attached=True))
    result = run_pass()
    assert result.summary["recovered"] == 0 and result.summary["recovery_pending"] == 1


def test_a_repeated_warning_is_one_event_bumped_at_most_every_ten_minutes(api, run_pass):
    for i in range(3):
        fc.live_node(api, f"w{i}")
    fc.live_node(api, "alive", taints=[fc.SHUTDOWN])  # split-brain, every pass
    for _ in range(3):
        run_pass()
    [event] = [e for e in api.objects("events") if e["reason"] == "ShutdownTaintOnLiveNode"]
    assert event["count"] == 1, "three passes, one Event, not bumped within 10 minutes"
    event["lastTimestamp"] = stamp(601)
    api.add(event)
    run_pass()
    [event] = [e for e in api.objects("events") if e["reason"] == "ShutdownTaintOnLiveNode"]
    assert event["count"] == 2 and event["lastTimestamp"] > stamp(60)


def cronjob_env(job_name: str) -> dict:
    """The environment the CronJob gives the pod of one of its Jobs, downward-API fields resolved as the
    kubelet would (the Job controller labels its pods with the Job's name)."""
    docs = [d for d in yaml.safe_load_all((ROOT / "deploy/base/cronjob.yaml").read_text()) if d]
    [cron] = [d for d in docs if d["kind"] == "CronJob"]
    template = cron["spec"]["jobTemplate"]["spec"]["template"]
    labels = {**template["metadata"].get("labels", {}), "batch.kubernetes.io/job-name": job_name}
    env = {}
    for item in template["spec"]["containers"][0]["env"]:
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            path = item["valueFrom"]["fieldRef"]["fieldPath"]
            [key] = re.findall(r"^metadata\.labels\['([^']+)'\]$", path)
            env[item["name"]] = labels[key]
    return env


def pushgateway(tmp_path):
    binary = real_tool("prometheus-pushgateway", "prometheus-pushgateway")
    port = free_port()
    proc = subprocess.Popen([binary, f"--web.listen-address=127.0.0.1:{port}",
                             f"--persistence.file={tmp_path / 'persist'}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    return proc, f"http://127.0.0.1:{port}"


def groups(url: str) -> list[dict]:
    with urllib.request.urlopen(f"{url}/api/v1/metrics", timeout=5) as answer:
        return [g for g in json.loads(answer.read())["data"] if g["labels"].get("job") == "rwo-failover"]


def gauge(group: dict, name: str) -> float:
    return float(group[name]["metrics"][0]["value"]) if name in group else 0.0


def test_cronjob_passes_replace_one_pushgateway_group_and_keep_the_last_success(api, run_pass, tmp_path):
    """Pushgateway groups never expire: a group per Job would pile up 1,440 a day. Two Jobs' passes, as the
    CronJob runs them, leave one group; a failed pass after a good one keeps the last success's time."""
    gateway, url = pushgateway(tmp_path)
    try:
        fc.outage(api)
        keep = {"KUBECONFIG", "LOG_FORMAT", "PASS_TIMEOUT_SECONDS"}
        first = {k: v for k, v in cronjob_env("rwo-failover-29000001").items() if k not in keep}
        assert run_pass(**{**first, "PUSHGATEWAY_URL": url}).code == EXIT_OK
        [group] = groups(url)
        succeeded = gauge(group, "rwo_failover_last_success_timestamp_seconds")
        assert succeeded > 0

        api.deny("list", "nodes")  # the next Job's pass fails (exit 5)
        second = {k: v for k, v in cronjob_env("rwo-failover-29000002").items() if k not in keep}
        assert run_pass(**{**second, "PUSHGATEWAY_URL": url}).code != EXIT_OK
        found = groups(url)
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
    assert len(found) == 1, [g["labels"] for g in found]
    assert gauge(found[0], "rwo_failover_last_pass_timestamp_seconds") > succeeded
    assert gauge(found[0], "rwo_failover_last_success_timestamp_seconds") == succeeded


def test_each_pass_replaces_every_series_of_the_last_one_on_the_pushgateway(api, run_pass, tmp_path):
    """A push is a POST, which replaces only the metric families it carries samples for: a labelled counter
    this pass left at no samples would keep the last pass's series for ever (an old refusal, say)."""
    gateway, url = pushgateway(tmp_path)
    try:
        fc.outage(api, live=6)
        fc.outage(api, dead="dead-2", pods=("db-1",), live=0)
        # No storm cool-down: the second pass must not refuse for the first one's brake.
        no_cooldown = {"STORM_COOLDOWN_SECONDS": "0", "ALLOW_UNSAFE": "storm-cooldown"}
        refused = run_pass(PUSHGATEWAY_URL=url, MAX_NODES_PER_PASS="1", **no_cooldown)
        assert refused.code == EXIT_REFUSED
        [group] = groups(url)
        assert series(group, "rwo_failover_refusals_total")[(("reason", "nodes-per-pass"),)] == 1
        assert run_pass(PUSHGATEWAY_URL=url, **no_cooldown).code == EXIT_OK
        [group] = groups(url)
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
    refusals = series(group, "rwo_failover_refusals_total")
    assert refusals[(("reason", "nodes-per-pass"),)] == 0, "this pass refused nothing: its figure, not the last one's"
    assert set(refusals.values()) == {0.0}
    assert series(group, "rwo_failover_passes_total")[(("result", "refused"),)] == 0


def series(group: dict, name: str) -> dict[tuple, float]:
    """A metric family in a Pushgateway group: {its own labels (job and instance left out): value}."""
    return {tuple(sorted((k, v) for k, v in m["labels"].items() if k not in ("job", "instance"))): float(m["value"])
            for m in group.get(name, {}).get("metrics", [])}


def test_every_labelled_metric_starts_with_each_documented_value_at_zero():
    """So a pass exposes (and pushes) every series it owns; only api_requests' label values are open-ended."""
    doc = (ROOT / "docs" / "monitoring.md").read_text()
    documented = {label: re.findall(r"`([a-z-]+)`", re.search(rf"`{label}` is (.*?)\.", doc, re.S)[1])
                  for label in ("result", "reason", "verdict", "cause")}
    exposed: dict[str, set[str]] = {}
    for family in Metrics().registry.collect():
        for sample in family.samples:
            for label, value in sample.labels.items():
                exposed.setdefault(label, set()).add(value)
    for label, values in documented.items():
        assert exposed.get(label) == set(values), label


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a document's headings (its html-pipeline's TableOfContentsFilter): the heading's
    text (inline code and links as their text), lower case, every character but letters, digits, spaces,
    hyphens and underscores dropped, spaces to hyphens; a repeated anchor gets -1, -2, ... Headings inside
    fenced code blocks are none."""
    seen: dict[str, int] = {}
    anchors = set()
    text = re.sub(r"^(```|~~~).*?^\1", "", markdown, flags=re.M | re.S)
    for heading in re.findall(r"^#{1,6} +(.+?)#*$", text, re.M):
        heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # [text](url) -> text
        anchor = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        anchors.add(anchor if count == 0 else f"{anchor}-{count}")
    return anchors


def test_github_anchors_follow_github_s_rules():
    doc = "# Runbook\n## `RwoX` (critical)\n## Pause and resume!\n```sh\n# not a heading\n```\n## Pause and resume\n" \
          "## [A link](https://x.example)\n"
    assert github_anchors(doc) == {"runbook", "rwox-critical", "pause-and-resume", "pause-and-resume-1", "a-link"}


# The runbook every alert points into, by default: this project's docs/runbook.md on its main branch.
RUNBOOK = "https://github.com/rwo-failover/rwo-failover/blob/main/docs/runbook.md"


@pytest.mark.parametrize("path", ["rules.yml", "prometheusrule.yaml"])
def test_every_alert_links_a_runbook_section_that_exists(path):
    doc = yaml.safe_load((MONITORING / path).read_text())
    rules = [r for g in doc.get("spec", doc)["groups"] for r in g["rules"]]
    source = re.search(r'org\.opencontainers\.image\.source="([^"]+)"', (ROOT / "Dockerfile").read_text())[1]
    assert f"{source}/blob/main/docs/runbook.md" == RUNBOOK, "the image's source is the repository the runbook is in"
    anchors = github_anchors((ROOT / "docs" / "runbook.md").read_text())
    assert rules
    for rule in rules:
        url = rule["annotations"]["runbook_url"]
        page, _, anchor = url.partition("#")
        assert page == RUNBOOK, url
        assert anchor == rule["alert"].lower(), "the alert's own section"
        assert anchor in anchors, f"{rule['alert']}: no section #{anchor} in docs/runbook.md"


def test_the_chart_and_the_rules_share_one_runbook_base_url():
    """The chart's default is the base in monitoring/rules.yml (its PrometheusRule is rendered from that file,
    and test_chart keeps the render equal to monitoring/prometheusrule.yaml); monitoring.runbookBaseUrl moves
    every alert's link at once, each still to its own section."""
    from rwo_testkit import chart

    values = yaml.safe_load((chart.CHART / "values.yaml").read_text())
    assert values["monitoring"]["runbookBaseUrl"] == RUNBOOK

    def urls(base: str | None) -> dict[str, str]:
        monitoring = {"prometheusRule": True, **({"runbookBaseUrl": base} if base else {})}
        [rule] = [d for d in chart.render({"monitoring": monitoring}) if d["kind"] == "PrometheusRule"]
        return {r["alert"]: r["annotations"]["runbook_url"] for g in rule["spec"]["groups"] for r in g["rules"]}
    default = urls(None)
    rules = yaml.safe_load((MONITORING / "rules.yml").read_text())
    assert default == {r["alert"]: r["annotations"]["runbook_url"] for g in rules["groups"] for r in g["rules"]}
    moved = urls("https://wiki.example.com/ops/rwo-failover")
    assert moved == {alert: f"https://wiki.example.com/ops/rwo-failover#{alert.lower()}" for alert in default}


def test_a_runbook_base_url_cannot_carry_a_prometheus_template():
    """Attack on monitoring.runbookBaseUrl: Prometheus runs every annotation as a Go template. A query needs a
    space, which the pattern already refused; braces alone ({{$value}}, {{$labels.instance}}) were let through
    and expanded in every alert's link. The schema refuses braces."""
    import helm_python as helm

    from rwo_testkit import chart

    with pytest.raises(helm.HelmValuesError, match="runbookBaseUrl"):
        chart.render({"monitoring": {"prometheusRule": True,
                                     "runbookBaseUrl": "https://x.example/{{$labels.instance}}"}})
