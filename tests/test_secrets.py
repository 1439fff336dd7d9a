"""Secrets never reach a log: URLs are logged without their userinfo, tokens never.

The targeted tests here plant a secret and grep what one pass said. The suite-wide check is the last test
to run: conftest collects every log line every test produced (rwo_testkit/log_sink.py), and every secret
any test planted must be absent from all of them.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT, SESSION_LOG, plant, planted_secrets

from rwo_failover.run.exitcodes import EXIT_CONFIG, EXIT_OK
from rwo_testkit import fake_cluster as fc
from rwo_testkit.control_plane import free_port


def said(result) -> str:
    return json.dumps(result.logs) + result.stderr


def test_a_pushgateway_password_is_never_logged(api, run_pass):
    """Row 7 of issue 18: PUSHGATEWAY_URL=https://user:password@host/ was logged verbatim on every push."""
    password = plant("pushgateway-pa55word")
    fc.outage(api)

    result = run_pass(PUSHGATEWAY_URL=f"http://metrics:{password}@127.0.0.1:{free_port()}/")

    assert result.code == EXIT_OK
    [line] = result.lines("could not push metrics to the Pushgateway; the pass itself is unaffected")
    assert line["url"] == f"http://127.0.0.1:{line['url'].rsplit(':', 1)[1]}", "logged without its userinfo"
    assert password not in said(result)


@pytest.mark.parametrize("name, value", [
    ("PUSHGATEWAY_URL", "http://metrics:{secret}@host with space/"),
    ("FENCE_WEBHOOK_URL", "https://fencer:{secret}@fencer.example/fence"),
])
def test_a_rejected_url_is_named_without_its_userinfo(run_pass, name, value):
    secret = plant("url-s3cret-in-a-setting")
    env = {"FENCING": "webhook", "FENCE_WEBHOOK_URL": "https://fencer.example/fence",
           name: value.format(secret=secret)}
    result = run_pass(**env)
    assert result.code == EXIT_CONFIG and name in result.stderr
    assert secret not in said(result)


# Userinfo that urllib.parse splits elsewhere than where the user meant: a ? or # ends the authority early, a /
# starts the path, a second @ is read by some parsers as the end of the userinfo. (issue 18 review)
@pytest.mark.parametrize("name, template", [
    ("FENCE_WEBHOOK_URL", "https://fencer:{secret}@fencer.example/fence"),
    ("PUSHGATEWAY_URL", "http://metrics:{secret}@host with space/"),
    ("PUSHGATEWAY_URL", "http://metrics:{secret}@127.0.0.1:9091/"),
])
@pytest.mark.parametrize("secret", ["s3cret?pw-q", "s3cret#pw-h", "s3cret/pw-s", "s3cret@pw-a"])
def test_a_url_whose_password_holds_a_delimiter_is_refused_without_echoing_it(run_pass, name, template, secret):
    plant(secret)
    before = secret.split("?")[0].split("#")[0].split("/")[0].split("@")[0]  # "s3cret": read as a port, say
    env = {"FENCING": "webhook", "FENCE_WEBHOOK_URL": "https://fencer.example/fence",
           name: template.format(secret=secret)}

    result = run_pass(**env)

    assert result.code == EXIT_CONFIG and name in result.stderr, result.stderr
    assert secret not in said(result) and before not in said(result), result.stderr


def one_pass(kubeconfig: str, **env: str) -> subprocess.CompletedProcess:
    """The real process, as a CronJob runs it."""
    done = subprocess.run([sys.executable, str(ROOT / "reconcile.py"), "--once"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={"PATH": "/usr/bin:/bin", "KUBECONFIG": kubeconfig,
                                                      "LOG_FORMAT": "json", **env})
    SESSION_LOG.add(done.stdout)
    SESSION_LOG.add(done.stderr)
    return done


@pytest.mark.parametrize("password", ["pa55?word-q", "pa55#word-h"])
def test_a_pushgateway_password_with_a_delimiter_stops_the_process_at_start_up_not_every_push(
        api, kubeconfig, password):
    """Accepted by the old pattern, it made every run fail in the push with InvalidURL, part of the password
    on stderr."""
    fc.live_node(api, "w0")
    plant(password)
    done = one_pass(kubeconfig, PUSHGATEWAY_URL=f"http://metrics:{password}@127.0.0.1:1/")
    assert done.returncode == EXIT_CONFIG, done.stderr
    assert "percent-encode" in done.stderr and api.requests == []
    assert "pa55" not in done.stdout + done.stderr


def test_a_percent_encoded_password_is_accepted_and_still_never_logged(api, run_pass):
    password = plant("pa55%3Fword")
    fc.outage(api)
    result = run_pass(PUSHGATEWAY_URL=f"http://metrics:{password}@127.0.0.1:{free_port()}/")
    assert result.code == EXIT_OK
    assert password not in said(result) and "pa55?word" not in said(result)


@pytest.mark.after_all
def test_no_planted_secret_appears_in_any_log_line_of_the_whole_suite():
    secrets = planted_secrets()
    assert secrets, "the suite plants secrets (a kubeconfig token at least); none were registered"
    assert SESSION_LOG.lines, "the collector saw no log line at all: it is not wired up"
    leaks = [(secret, line[:300]) for line in SESSION_LOG.lines for secret in secrets if secret in line]
    assert leaks == []
