"""docs/settings.md's Events table, made from rwo_failover/model/event_reasons.py: `python -m rwo_testkit.events_table`
writes it between its markers; tests/test_events_table.py checks that the committed one is this one."""

from __future__ import annotations

import sys
from pathlib import Path

from rwo_failover.model.event_reasons import table

DOC = Path(__file__).resolve().parent.parent / "docs" / "settings.md"
START, END = "<!-- events-table", "<!-- /events-table -->"


def rendered(text: str) -> str:
    """`text` with its Events table replaced by the one made from the code."""
    head, rest = text.split(START, 1)
    marker, _ = rest.split("\n", 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}{marker}\n{table()}{END}{tail}"


def main() -> int:
    DOC.write_text(rendered(DOC.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
