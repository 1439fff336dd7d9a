"""The demo a newcomer runs first must really work: a dry-run that changes nothing, then a real fix."""

from __future__ import annotations

import io

from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit.demo import main


def test_demo_fixes_the_seeded_cluster_and_shows_before_and_after():
    out = io.StringIO()
    assert main([], {}, out) == EXIT_OK
    text = out.getvalue()
    before, rest = text.split("=== dry-run pass", 1)
    dry, rest = rest.split("=== real pass ===", 1)
    real, rest = rest.split("=== after:", 1)
    after, status = rest.split("=== kubectl rwo-failover status", 1)
    assert "shop/postgres-0" in before and "pv-shop-data-postgres-0" in before
    assert dry.count("would force-delete pod") == 2 and "force-deleted pod" not in dry.replace("would force-delete", "")
    assert real.count("force-deleted pod") == 2 and real.count("deleted VolumeAttachment") == 2
    assert "shop/postgres-0" not in after and "pv-shop-data-postgres-0" not in after
    assert "shop/legacy-0" in after and "pv-shop-data-legacy-0" in after, "the opted-out pod keeps its volume"
    # The plan a person reads, as a terminal shows it: the verdict, what would be released, what is skipped.
    assert "PLAN (dry run: nothing will be changed)" in dry and "WOULD RELEASE (2 pods, 2 VolumeAttachments)" in dry
    assert "PLAN" not in real, "the table is the dry run's"
    # Then what `kubectl rwo-failover status` says the install holds now (issue 38): read-only, after the real pass.
    assert "nothing was written" in status and "worker-3  down" in status
    pending = status.split("RECOVERIES PENDING (2)", 1)[1].split("LAST PASSES", 1)[0]
    assert "shop/data-postgres-0" in pending and "shop/redis-data" in pending
