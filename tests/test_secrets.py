"""Secrets never reach a log: URLs are logged without their userinfo, tokens never.

The targeted tests here plant a secret and grep what one pass said. The suite-wide check is the last test
to run: conftest collects every log line every test produced (rwo_testkit/log_sink.py), and every secret
any test planted must be absent from all of them.
"""

from __future__ import annotations

import json

import pytest

from conftest import SESSION_LOG, planted_secrets, plant
from rwo_failover.exitcodes import EXIT_CONFIG, EXIT_OK
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


@pytest.mark.after_all
def test_no_planted_secret_appears_in_any_log_line_of_the_whole_suite():
    secrets = planted_secrets()
    assert secrets, "the suite plants secrets (a kubeconfig token at least); none were registered"
    assert SESSION_LOG.lines, "the collector saw no log line at all: it is not wired up"
    leaks = [(secret, line[:300]) for line in SESSION_LOG.lines for secret in secrets if secret in line]
    assert leaks == []
