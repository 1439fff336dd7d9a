"""docs/operations.md's uninstall steps name only what exists: its listing of our taints, after a real pass, names
the node we tainted and no other. The block's `kubectl get --raw PATH` is a plain GET of PATH: the test sends it to
the fixture API server itself (kubectl sends no token over the fixture's plain HTTP) and pipes the answer into the
block's own jq filter, run by the real jq."""

from __future__ import annotations

import re
import subprocess
import urllib.request

from conftest import ROOT
from helpers import real_tool

from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import TOKEN


def listing() -> tuple[str, str]:
    """The block's API path and the shell pipeline after kubectl's part."""
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    block = re.search(r"```sh\n(.*?)```", text.split("<!-- uninstall-list", 1)[1], re.S).group(1)
    found = re.match(r"kubectl get --raw '([^']+)' \\\n\s*\|(.*)", block, re.S)
    assert found, block
    return found.group(1), found.group(2).strip()


def test_the_uninstall_listing_names_the_nodes_that_carry_our_taint(api, run_pass):
    real_tool("jq", "jq")
    fc.outage(api)  # "dead" down with a stuck pod: the pass taints it
    # a human's out-of-service taint, on a node down with nothing to release: no record of ours names it
    fc.dead_node(api, "tainted-by-a-human", taints=(fc.SHUTDOWN, fc.our_taint("2026-01-01T00:00:00Z")))
    assert run_pass().code == EXIT_OK
    [taint] = [t for t in api.get("nodes", "dead")["spec"]["taints"] if t["key"] == "node.kubernetes.io/out-of-service"]

    path, pipeline = listing()
    request = urllib.request.Request(api.url + path, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        listed = answer.read()
    done = subprocess.run(["bash", "-o", "pipefail", "-c", pipeline], input=listed.decode(), capture_output=True,
                          text=True, timeout=60)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"dead {taint['timeAdded']}"]
