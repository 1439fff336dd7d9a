"""Issue 29 section 3: the confirmed per-pod failover time as a low-cardinality histogram, in both modes.

Continuous mode keeps it in its own registry. A CronJob's passes are separate processes pushing into one
Pushgateway group, so each pass adds its samples to what the group already holds: the histogram only ever grows,
and rate() and histogram_quantile() see every recovery, even two passes in a row that confirm one each (which,
pushed as each pass's own figure, would read 1 then 1: no increase at all)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from test_monitoring import groups, pushgateway, replacement

from rwo_failover.run.exitcodes import EXIT_OK
from rwo_failover.run.metrics import FAILOVER_BUCKETS, Metrics, documented
from rwo_testkit import fake_cluster as fc

NAME = "rwo_failover_failover_seconds"


def histogram(group: dict) -> tuple[float, float, dict[str, float]]:
    """(count, sum, {le: cumulative count}) of the failover histogram in a Pushgateway group."""
    [metric] = group[NAME]["metrics"]
    return float(metric["count"]), float(metric["sum"]), {k: float(v) for k, v in metric["buckets"].items()}


def two_recoveries_one_pass_apart(api, run_pass, url: str) -> list[int]:
    """One dead node, two stuck StatefulSet pods: freed together, their replacements confirmed one pass each."""
    fc.outage(api, pods=("db-0", "db-1"))
    codes = [run_pass(PUSHGATEWAY_URL=url).code]
    for name in ("db-0", "db-1"):
        replacement(api, name, "w1", ready=True, ready_ago=3, claim=f"data-{name}")
        api.add(fc.attachment(f"pv-default-data-{name}", "w1", attached=True))
        done = run_pass(PUSHGATEWAY_URL=url)
        assert done.summary["recovered"] == 1
        codes.append(done.code)
    return codes


def test_the_histogram_has_no_per_pod_or_per_node_label():
    [(_name, kind, labels)] = [m for m in documented() if m[0] == NAME]
    assert kind == "histogram" and labels == ""


def test_cronjob_passes_add_to_the_pushed_histogram_never_replace_it(api, run_pass, tmp_path):
    gateway, url = pushgateway(tmp_path)
    try:
        codes = two_recoveries_one_pass_apart(api, run_pass, url)
        [group] = groups(url)
        quiet = run_pass(PUSHGATEWAY_URL=url)  # confirms nothing: the histogram stays as it was
        [after_quiet] = groups(url)
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
    assert codes == [EXIT_OK] * 3 and quiet.code == EXIT_OK
    count, total, buckets = histogram(group)
    assert count == 2, "both recoveries, one per pass, are in the group"
    assert 2 * 590 <= total <= 2 * 620, "each about 600 s: the node went NotReady 600 s ago"
    assert buckets["+Inf"] == 2 and buckets["300"] == 0 and buckets["1200"] == 2
    assert histogram(after_quiet) == histogram(group)


class _Gateway(BaseHTTPRequestHandler):
    """A Pushgateway that answers the read-back with `answer` and takes every push."""

    answer = b""
    pushed: list[bytes] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.answer)))
        self.end_headers()
        self.wfile.write(self.answer)

    def do_POST(self) -> None:
        self.pushed.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def group_json(buckets: dict, count: str, total: str, instance: str = "rwo-failover") -> bytes:
    return json.dumps({"status": "success", "data": [{
        "labels": {"job": "rwo-failover", "instance": instance},
        NAME: {"type": "HISTOGRAM", "metrics": [{"buckets": buckets, "count": count, "sum": total,
                                                 "labels": {"job": "rwo-failover", "instance": instance}}]}}]}).encode()


GOOD = {str(b): "1" for b in FAILOVER_BUCKETS} | {"15": "0", "+Inf": "1"}


@pytest.mark.parametrize("answer, carried", [
    (group_json(GOOD, "1", "20"), 2.0),  # read back: 1 + this pass's 1
    (group_json(GOOD, "1", "20", instance="another-install"), 1.0),  # another install's group is not ours
    (group_json(GOOD | {"30": "5"}, "1", "20"), 1.0),  # buckets that fall as le grows: not a histogram
    (group_json(GOOD, "-3", "20"), 1.0),
    (group_json(GOOD, "1", "NaN"), 1.0),
    (group_json({"15": "1"}, "1", "20"), 1.0),  # other buckets than ours
    (b"<html>not json</html>", 1.0),
    (b"[" * 100000, 1.0),
])
def test_a_read_back_that_does_not_hold_up_starts_afresh_and_the_push_still_goes(answer, carried, caplog):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
    _Gateway.answer, _Gateway.pushed = answer, []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        metrics = Metrics()
        metrics.recovered(25.0)
        metrics.push(f"http://127.0.0.1:{server.server_address[1]}", "rwo-failover", timeout=5)
    finally:
        server.shutdown()
        server.server_close()
    [body] = _Gateway.pushed
    [line] = [x for x in body.decode().splitlines() if x.startswith(NAME + "_count")]
    assert float(line.split()[-1]) == carried
