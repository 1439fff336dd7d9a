"""The chart's README: its values table is the one made from values.yaml's comments (as helm-docs makes one), and
every value in it says what it does."""

from __future__ import annotations

import yaml

from rwo_testkit import values_table


def test_the_committed_values_table_is_the_generated_one():
    readme = values_table.README.read_text()
    assert readme == values_table.rendered_readme(readme, (values_table.CHART / "values.yaml").read_text()), \
        "run: python -m rwo_testkit.values_table"


def test_every_value_is_a_row_with_a_description():
    text = (values_table.CHART / "values.yaml").read_text()
    rows = values_table.rows(text)
    keys = [key for key, _, _, _ in rows]
    assert not [key for key, _, _, description in rows if not description], "a value without a comment"
    values = yaml.safe_load(text)
    for key in ("fencing.mode", "fencing.redfish.bmcSecret", "brakes.maxUnhealthyFraction", "settings",
                "image.allowTagWithoutDigest", "monitoring.runbookBaseUrl"):
        assert key in keys, key
    for top in values:  # every top-level key is a row, or the parent of rows
        assert any(key == top or key.startswith(top + ".") for key in keys), top


def test_the_table_is_made_from_comments_and_defaults():
    text = "# Top.\na: 1\nb:\n  # Inner, with a | pipe.\n  c: [x, y]\n\n" \
           "  # Cut off by the blank line above? No: kept.\n  d: {secretName: \"\", key: \"\"}\ne:\n  f: {}\n"
    assert values_table.rows(text) == [
        ("a", "int", "1", "Top."), ("b.c", "list", '["x","y"]', "Inner, with a | pipe."),
        ("b.d", "object", '{"secretName":"","key":""}', "Cut off by the blank line above? No: kept."),
        ("e.f", "object", "{}", "")]
    assert "Inner, with a \\| pipe." in values_table.table(text)


def test_check_mode_fails_on_a_stale_table(tmp_path, monkeypatch):
    stale = tmp_path / "README.md"
    stale.write_text(f"x\n{values_table.START}\n| old |\n{values_table.END}\n")
    monkeypatch.setattr(values_table, "README", stale)
    assert values_table.main(["--check"]) == 1 and "| old |" in stale.read_text()
    assert values_table.main([]) == 0 and values_table.main(["--check"]) == 0
