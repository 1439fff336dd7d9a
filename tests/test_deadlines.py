"""A total deadline on every outbound call (issue 28): an answer trickled a few bytes at a time, each piece within
REQUEST_TIMEOUT_SECONDS, must not outlive the pass (API calls) or the push's own timeout (the Pushgateway).
Wall times are judged against generous bounds of the deadline, never a tight figure."""

from __future__ import annotations

import io
import json
import time

from rwo_failover.run.cli import main
from rwo_failover.run.exitcodes import EXIT_UNAVAILABLE
from rwo_failover.run.metrics import Metrics
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import Fault
from rwo_testkit.raw_reply import RawReply

PASS_TIMEOUT = 3.0
SLACK = 2.0  # generous: a shared machine, a second's truncation, the summary and its metrics


def test_a_node_list_trickled_within_every_read_timeout_ends_with_the_pass(api, run_pass):
    """Each piece comes 0.05 s after the last, well within REQUEST_TIMEOUT_SECONDS=1: before the fix the pass
    read on for the whole answer (3 nodes, about 30 s), far past its 3 s deadline."""
    for name in ("w0", "w1", "w2"):
        fc.live_node(api, name)
    api.faults.append(Fault("trickle", verb="list", resource="nodes", delay=0.05))
    started = time.monotonic()
    # MIN_NOT_READY_SECONDS=0: no wait of its own, so start-up accepts a one-shot run this short
    result = run_pass(PASS_TIMEOUT_SECONDS=str(PASS_TIMEOUT), REQUEST_TIMEOUT_SECONDS="1", MIN_NOT_READY_SECONDS="0",
                      ALLOW_UNSAFE="min-not-ready")
    took = time.monotonic() - started
    assert result.code == EXIT_UNAVAILABLE
    assert took < PASS_TIMEOUT + SLACK, f"the pass ran {took:.1f}s with a {PASS_TIMEOUT}s deadline"


def test_a_trickling_pushgateway_ends_with_the_push_timeout():
    """The reply, status line included, comes a few bytes at a time, each piece well within the timeout."""
    reply = b"HTTP/1.1 200 OK\r\nX-Padding: %s\r\nContent-Length: 0\r\n\r\n" % (b"x" * 200)
    with RawReply(reply, trickle=0.2) as gateway:
        started = time.monotonic()
        Metrics().push(gateway.url, "rwo-failover", timeout=1.0)
        took = time.monotonic() - started
    assert took < 1.0 + SLACK, f"the push ran {took:.1f}s with a 1s timeout"


def test_trickled_headers_end_with_the_pass_too(tmp_path):
    """Found attacking the body fix: urllib3 reads the status line and headers before any body read, so a proxy
    trickling them (4 bytes every 0.2 s) kept a 3 s pass running 13.8 s."""
    body = b'{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}'
    reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Pad: %s\r\nContent-Length: %d\r\n\r\n%s" % (
        b"x" * 200, len(body), body)
    with RawReply(reply, trickle=0.2) as proxy:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": proxy.url}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
        started = time.monotonic()
        code = main(["--once"], {"KUBECONFIG": str(kubeconfig), "LOG_FORMAT": "json",
                                 "PASS_TIMEOUT_SECONDS": str(PASS_TIMEOUT), "REQUEST_TIMEOUT_SECONDS": "1",
                                 "MIN_NOT_READY_SECONDS": "0", "ALLOW_UNSAFE": "min-not-ready"},
                    stdout=io.StringIO(), stderr=io.StringIO())
        took = time.monotonic() - started
    assert code == EXIT_UNAVAILABLE
    assert took < PASS_TIMEOUT + SLACK, f"the pass ran {took:.1f}s with a {PASS_TIMEOUT}s deadline"
