"""Every Event reason is in one place (rwo_failover/model/event_reasons.py): docs/settings.md's table is made from
it, and every reason it names is one a pass writes."""

from __future__ import annotations

import re

from conftest import ROOT

from rwo_failover.model.event_reasons import DESCRIBED, Reason
from rwo_testkit import events_table


def test_the_committed_events_table_is_the_generated_one():
    text = events_table.DOC.read_text(encoding="utf-8")
    assert text == events_table.rendered(text), "run: python -m rwo_testkit.events_table"


def test_every_reason_is_described_and_written_somewhere():
    assert set(DESCRIBED) == set(Reason)
    written = set()
    for path in (ROOT / "rwo_failover").rglob("*.py"):
        written |= set(re.findall(r"\bReason\.(\w+)", path.read_text(encoding="utf-8")))
    assert {r.name for r in Reason} <= written, "a reason the docs name but no pass writes"


def test_no_event_reason_is_written_as_a_literal():
    literal = re.compile(r"""\breason=["'][A-Z]""")
    found = [f"{p.relative_to(ROOT)}" for p in (ROOT / "rwo_failover").rglob("*.py")
             if literal.search(p.read_text(encoding="utf-8"))]
    assert found == [], "an Event reason comes from event_reasons.Reason"
