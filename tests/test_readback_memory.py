"""Attack on the CronJob's Pushgateway read-back (issue 29 section 3): its answer holds every group on the gateway,
up to MAX_ANSWER_BYTES, and is parsed whole. Memory must be bounded by what we keep, not by what the gateway (or
whatever answers at its address) sends: the CronJob's memory limit is 256Mi, a pass uses about 60 MiB before its
push, and an OOM kill there loses the pass's metrics and fails its Job."""

from __future__ import annotations

import threading
import tracemalloc
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rwo_failover.run.metrics import FAILOVER, FAILOVER_BUCKETS
from rwo_failover.run.pushed import MAX_ANSWER_BYTES, NotCarried, read_back

BUDGET = 64 * 2 ** 20  # what the read-back may add at its peak, the answer's own bytes included


def dense(pieces: int, piece: bytes) -> bytes:
    """A JSON list of `pieces` small values: the most Python objects per byte of answer."""
    return b"[" + piece + (b"," + piece) * (pieces - 1) + b"]"


@pytest.mark.parametrize("answer", [
    dense(MAX_ANSWER_BYTES // 3 - 1, b"{}"),  # just under the byte cap: about 2.8 million empty objects
    dense(MAX_ANSWER_BYTES // 3 - 1, b"[]"),
    dense(700_000, b"{}"),  # well under the byte cap
], ids=["objects-at-cap", "lists-at-cap", "objects-2MiB"])
def test_a_dense_answer_is_refused_within_a_memory_budget(answer):
    class Gateway(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    assert len(answer) <= MAX_ANSWER_BYTES
    server = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tracemalloc.start()
    try:
        with pytest.raises(NotCarried):
            read_back(f"http://127.0.0.1:{server.server_address[1]}", "", "", instance="rwo-failover", name=FAILOVER,
                      bounds=FAILOVER_BUCKETS, timeout=20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        server.shutdown()
        server.server_close()
    assert peak < BUDGET, (f"the read-back peaked at {peak / 2 ** 20:.0f} MiB "
                           f"for a {len(answer) / 2 ** 20:.1f} MiB answer")


def test_a_big_real_shaped_answer_is_still_read():
    """The bound on values does not cost a big shared gateway its read-back: about 7 MiB of groups shaped as the
    Pushgateway writes them (other instances' histograms), ours among them, is read back."""
    import json

    from test_failover_histogram import GOOD, group_json

    one = json.loads(group_json(GOOD, "1", "20", instance="other"))["data"][0]
    others = [dict(one, labels={"job": "rwo-failover", "instance": f"other-{i}"}) for i in range(19_000)]
    ours = json.loads(group_json(GOOD, "1", "20"))["data"][0]
    answer = json.dumps({"status": "success", "data": others + [ours]}).encode()
    assert 6 * 2 ** 20 < len(answer) <= MAX_ANSWER_BYTES

    class Gateway(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        carried = read_back(f"http://127.0.0.1:{server.server_address[1]}", "", "", instance="rwo-failover",
                            name=FAILOVER, bounds=FAILOVER_BUCKETS, timeout=20)
    finally:
        server.shutdown()
        server.server_close()
    assert carried is not None and carried.total == 20.0
