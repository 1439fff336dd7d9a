"""The fence webhook as a hostile or broken fencer (or a proxy in front of one) may answer it: bytes that are
not HTTP, an answer trickled one byte at a time, a stop signal while it retries. Each is a failed fence with a
reason, never a crash, and never a call past the pass deadline or the guard. Real HTTPS servers on loopback
(rwo_testkit/fence_server.py), the fixture API server, the real client.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, plant

from rwo_failover.run.exitcodes import EXIT_FAILED
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fence_server import FenceServer, RawFenceServer, http_answer

TOKEN = "s3cret-webhook-token"


def untouched(api) -> bool:
    return not [r for r in api.requests if (r.verb, r.resource) in
                (("delete", "pods"), ("delete", "volumeattachments"), ("patch", "nodes"))]


def webhook_pass(run_pass, fencer, tmp_path, **env):
    token = tmp_path / "token"
    token.write_text(plant(TOKEN) + "\n")
    return run_pass(FENCING="webhook", FENCE_WEBHOOK_URL=fencer.url, FENCE_WEBHOOK_TOKEN_FILE=str(token),
                    FENCE_WEBHOOK_CA_FILE=fencer.ca_file, **env)


def fencing_failed(api, node: str = "dead") -> list[str]:
    return [e["message"] for e in api.objects("events")
            if e["reason"] == "FencingFailed" and e["involvedObject"]["name"] == node]


# --- answers that are not HTTP ----------------------------------------------------------------------------

# (what the fencer sends, what the FencingFailed Warning says). A chunked body that cannot be read is, to
# http.client, one cut short: retried like a lost answer.
NOT_HTTP = {
    "a bad status line": (b"FENCED YES\r\n\r\n", "not valid HTTP (BadStatusLine)"),
    "a broken chunked body": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json"
                              b"\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", "chunked body is broken (after 2 attempt(s))"),
    "a 70 KB header": (b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * 70000 + b"\r\n\r\n", "not valid HTTP (LineTooLong)"),
    "more than 100 headers": (b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: a\r\n" % i for i in range(150)) + b"\r\n",
                              "not valid HTTP (HTTPException)"),
}


@pytest.mark.parametrize("kind", list(NOT_HTTP))
def test_an_answer_that_is_not_http_is_a_failed_fence_with_a_reason(api, run_pass, tmp_path, kind):
    fc.outage(api)
    reply, why = NOT_HTTP[kind]
    with RawFenceServer(reply) as fencer:
        result = webhook_pass(run_pass, fencer, tmp_path, API_MAX_ATTEMPTS="2")

    assert result.code == EXIT_FAILED, f"{kind}: exit {result.code}"
    assert untouched(api)
    [message] = fencing_failed(api)
    assert why in message, message
    assert TOKEN not in json.dumps(result.logs) + result.stderr + message


def test_junk_for_one_node_never_stops_the_failover_of_another(api, run_pass, tmp_path):
    """Two dead nodes: the fencer answers junk about dead-a (acted on first) and a clean yes about dead-b."""
    fc.outage(api, dead="dead-a", pods=("a-0",))
    fc.dead_node(api, "dead-b")
    fc.add_volume(api, "data-b-0", attached_to="dead-b")
    api.add(fc.pod("b-0", "dead-b", claims=["data-b-0"], terminating=True))

    def reply(asked) -> bytes:
        if asked["node"] == "dead-a":
            return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
        return http_answer(200, json.dumps({"fenced": True, "node": asked["node"], "uid": asked["uid"]}).encode())

    with RawFenceServer(reply) as fencer:
        result = webhook_pass(run_pass, fencer, tmp_path)

    assert result.code == EXIT_FAILED
    assert api.get("pods", "b-0", "default") is None, "dead-b, confirmed fenced, is failed over"
    assert api.get("pods", "a-0", "default") is not None and fencing_failed(api, "dead-a")



def test_an_answer_trickled_a_byte_at_a_time_ends_with_the_pass_deadline(api, run_pass, tmp_path):
    """Each byte comes well within REQUEST_TIMEOUT_SECONDS (a per-read timeout), but the whole answer would
    take ~25 s: the attempt ends at the pass deadline, as a failed fence."""
    fc.outage(api)
    with RawFenceServer(http_answer(200, json.dumps({"fenced": False}).encode()), trickle=0.25) as fencer:
        started = time.monotonic()
        result = webhook_pass(run_pass, fencer, tmp_path, PASS_TIMEOUT_SECONDS="2", REQUEST_TIMEOUT_SECONDS="1")
        took = time.monotonic() - started

    assert took < 2 + 3, f"the pass took {took:.1f} s with PASS_TIMEOUT_SECONDS=2"
    assert result.code == EXIT_FAILED and untouched(api)
    assert len(fencer.requests) == 1
    [failed] = [line["message"] for line in result.logs if line["message"].startswith("fence webhook did not confirm")]
    assert "pass deadline" in failed, failed

# --- the token file ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("content, why", [
    (f"{TOKEN}\n# rotated 2026-11-20\n", "more than one line"),
    ("\n  \n", "empty"),
    (f"Bearer {TOKEN}\n", "a character a bearer token cannot hold"),
    (TOKEN.encode() + b"\xff\n", "not ASCII text"),
])
def test_a_token_file_that_cannot_be_sent_is_refused_at_start_up(api, run_pass, tmp_path, content, why):
    fc.outage(api)
    path = tmp_path / "token"
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    plant(TOKEN)

    result = run_pass(FENCING="webhook", FENCE_WEBHOOK_URL="https://fencer.example/fence",
                      FENCE_WEBHOOK_TOKEN_FILE=str(path))

    assert result.code == 2, result.stderr
    assert f"FENCE_WEBHOOK_TOKEN_FILE={str(path)!r}" in result.stderr and why in result.stderr, result.stderr
    assert TOKEN not in result.stderr + json.dumps(result.logs)
    assert api.mutations() == []


def test_a_token_file_rewritten_badly_since_start_up_is_a_failed_fence_that_never_shows_it(api, run_pass, tmp_path):
    """Valid at start-up; by the time of the call a rotation has left a second line in it."""
    fc.outage(api)
    path = tmp_path / "token"
    path.write_text(plant(TOKEN) + "\n")

    def rotate(req):
        if req.verb == "list" and req.resource == "nodes":
            path.write_text(f"{TOKEN}\nsecond-{TOKEN}\n")
    api.hooks.append(rotate)

    with RawFenceServer(http_answer(200, b"{}")) as fencer:
        result = run_pass(FENCING="webhook", FENCE_WEBHOOK_URL=fencer.url, FENCE_WEBHOOK_TOKEN_FILE=str(path),
                          FENCE_WEBHOOK_CA_FILE=fencer.ca_file)
        assert fencer.requests == [], "nothing is sent without a token that can be sent"

    assert result.code == EXIT_FAILED and untouched(api)
    [message] = fencing_failed(api)
    assert f"FENCE_WEBHOOK_TOKEN_FILE {path}" in message and "more than one line" in message, message
    said = json.dumps(result.logs) + result.stderr + json.dumps(api.objects("events"))
    assert TOKEN not in said


# --- a stop signal while the webhook retries: a real process, a real SIGTERM ------------------------------

def start_pass(kubeconfig: str, fencer, tmp_path, **env: str) -> subprocess.Popen:
    token = tmp_path / "token"
    token.write_text(plant(TOKEN) + "\n")
    return subprocess.Popen(
        [sys.executable, str(ROOT / "reconcile.py"), "--once"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        env={"PATH": "/usr/bin:/bin", "KUBECONFIG": kubeconfig, "LOG_FORMAT": "json", "FENCING": "webhook",
             "FENCE_WEBHOOK_URL": fencer.url, "FENCE_WEBHOOK_TOKEN_FILE": str(token),
             "FENCE_WEBHOOK_CA_FILE": fencer.ca_file, "API_MAX_ATTEMPTS": "5", **env})


def signalled_mid_call(kubeconfig: str, fencer, tmp_path, **env: str) -> dict:
    """SIGTERM once the first POST has reached the fencer (which holds its answer back); the summary line."""
    proc = start_pass(kubeconfig, fencer, tmp_path, **env)
    try:
        deadline = time.monotonic() + 30
        while not fencer.requests and time.monotonic() < deadline:
            time.sleep(0.02)
        assert fencer.requests, "the pass never called the fencer"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == EXIT_FAILED and "Traceback" not in err, (proc.returncode, err)
    [summary] = [json.loads(line) for line in out.splitlines() if '"pass finished"' in line]
    assert summary["stopped_by"] == "stop requested (SIGTERM)"
    return summary


def test_no_webhook_retry_is_sent_after_a_stop_signal(api, kubeconfig, tmp_path):
    """The first POST is answered 503 after the signal: that attempt was answered, so the fence failed."""
    fc.outage(api)
    with FenceServer() as fencer:
        fencer.answer, fencer.delay = (503, {"error": "bmc busy"}), 1.0

        summary = signalled_mid_call(kubeconfig, fencer, tmp_path)
        time.sleep(1.0)  # a retry, had one been sent, would have arrived by now

        assert len(fencer.requests) == 1, f"{len(fencer.requests) - 1} retries were sent after the signal"
    assert summary["failures"] == 1 and summary["unconfirmed"] == 0 and untouched(api)


def test_a_webhook_call_stopped_after_an_attempt_that_got_no_answer_is_unconfirmed(api, kubeconfig, tmp_path):
    """The first POST times out after the signal: the fencer may have fenced; only a later pass can tell."""
    fc.outage(api)
    with FenceServer() as fencer:
        fencer.delay = 3.0

        summary = signalled_mid_call(kubeconfig, fencer, tmp_path, REQUEST_TIMEOUT_SECONDS="1")

        assert len(fencer.requests) == 1
    assert summary["unconfirmed"] == 1 and summary["failures"] == 0 and untouched(api)
