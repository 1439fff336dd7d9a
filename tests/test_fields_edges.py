"""model/fields.py at its edges (issue 37, found by `make mutants`): the typed accessors every object is read
through, RFC 3339 times, the server's stamps and the Ready condition. Each survivor of the mutation run that a
caller could observe (a value, a default, a bound, the reason a skip names) is killed here."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

import pytest

from rwo_failover.model.fields import (
    BadObject,
    bool_at,
    int_at,
    items_at,
    obj_at,
    opted_out,
    parse_time,
    ready_condition,
    server_time,
    strings_at,
    text_at,
    texts_at,
    typed_at,
)


@pytest.mark.parametrize("read, obj, reason", [
    (lambda o: typed_at(o, "x", str, what="a string"), [], "expected an object holding x, got list"),
    (lambda o: text_at(o, "x"), {"x": 1}, "x: expected a string, got int"),
    (lambda o: obj_at(o, "x"), {"x": "y"}, "x: expected an object, got str"),
    (lambda o: items_at(o, "x"), {"x": "y"}, "x: expected a list, got str"),
    (lambda o: items_at(o, "x"), {"x": [1]}, "x: expected a list of objects"),
    (lambda o: texts_at(o, "x"), {"x": {}}, "x: expected a list, got dict"),
    (lambda o: texts_at(o, "x"), {"x": [1]}, "x: expected a list of strings"),
    (lambda o: strings_at(o, "x"), {"x": {"k": 1}}, "x: expected strings as values"),
    (lambda o: bool_at(o, "x"), {"x": "true"}, "x: expected true or false, got str"),
    (lambda o: int_at(o, "x", 0), {"x": True}, "x: expected a whole number, got bool"),
    (lambda o: int_at(o, "x", 0, low=1, high=3), {"x": 4}, "x: 4 is outside [1, 3]"),
    (lambda o: ready_condition(o), {"conditions": [{"type": "Ready", "status": 1}]},
     "status: expected a string, got int"),
    (lambda o: parse_time(o), "2026-01-01", "'2026-01-01' is not an RFC 3339 time"),
    (lambda o: parse_time(o), "1899-12-31T23:59:59Z", "'1899-12-31T23:59:59Z' is outside the years 1900-2999"),
    (lambda o: parse_time(o), "x" * 50, f"{'x' * 40!r} is not an RFC 3339 time"),  # quoted, 40 characters at most
    (lambda o: parse_time(o), "2026-13-45T00:00:00Z",
     "'2026-13-45T00:00:00Z' is not a valid time: month must be in 1..12"),
])
def test_each_accessor_refuses_the_wrong_shape_naming_the_field_and_what_it_expected(read, obj, reason):
    """The reason is what the skip line says: the field and what it should have held."""
    with pytest.raises(BadObject) as refused:
        read(obj)
    assert str(refused.value) == reason


@pytest.mark.parametrize("value, low, high", [(1, 1, 3), (3, 1, 3), (0, 0, 5)])
def test_a_whole_number_at_either_bound_is_accepted(value, low, high):
    assert int_at({"x": value}, "x", 99, low=low, high=high) == value


def test_absent_or_null_means_the_default_and_a_value_is_kept():
    assert int_at({}, "x", 7) == 7 and int_at({"x": None}, "x", 7) == 7 and int_at({"x": 0}, "x", 7) == 0
    assert text_at({}, "x", "d") == "d" and text_at({"x": ""}, "x", "d") == ""
    assert bool_at({"x": True}, "x") is True and bool_at({"x": False}, "x") is False and bool_at({}, "x") is False
    assert obj_at({}, "x") == {} and items_at({"x": [{"a": 1}]}, "x") == [{"a": 1}] and texts_at({}, "x") == ()


@pytest.mark.parametrize("text, micros", [("2026-01-01T00:00:00.5Z", 500000), ("2026-01-01T00:00:00.123Z", 123000),
                                          ("2026-01-01T00:00:00.123456789Z", 123456),
                                          ("2026-01-01T01:00:00.25+01:00", 250000)])
def test_fractions_of_any_length_and_offsets_are_read_to_utc(text, micros):
    found = parse_time(text)
    assert found == datetime(2026, 1, 1, 0, 0, 0, micros, tzinfo=UTC)
    assert found.utcoffset().total_seconds() == 0


def test_the_years_bound_is_inclusive_and_empty_is_no_time():
    assert parse_time("1900-01-01T00:00:00Z").year == 1900 and parse_time("2999-12-31T23:59:59Z").year == 2999
    assert parse_time("") is None and parse_time(None) is None


def test_a_time_is_utc_whatever_this_process_s_time_zone():
    """astimezone() without an argument would give this machine's zone: every time must come out in UTC."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Kolkata"
    time.tzset()
    try:
        assert parse_time("2026-01-01T00:00:00Z").tzinfo is UTC
    finally:
        if before is None:
            os.environ.pop("TZ")
        else:
            os.environ["TZ"] = before
        time.tzset()


def test_the_server_s_stamp_is_the_latest_and_none_without_one():
    def entry(at: str, sub: str = "") -> dict:
        return {"manager": "m", "time": at, **({"subresource": sub} if sub else {})}

    meta = {"managedFields": [entry("2026-01-01T00:00:05Z"), entry("2026-01-01T00:00:09Z", "status"),
                              {"manager": "x"}]}
    assert server_time(meta) == parse_time("2026-01-01T00:00:09Z")
    assert server_time(meta, "") == parse_time("2026-01-01T00:00:05Z")
    assert server_time({}) is None and server_time({"managedFields": [{"manager": "x"}]}) is None


def test_the_ready_condition_is_read_and_no_other():
    status = {"conditions": [
        {"type": "MemoryPressure", "status": "False", "lastTransitionTime": "2026-01-01T00:00:01Z"},
        {"type": "Ready", "status": "Unknown", "lastTransitionTime": "2026-01-01T00:00:02Z"}]}
    assert ready_condition(status) == ("Unknown", parse_time("2026-01-01T00:00:02Z"))
    assert ready_condition({}) == (None, None)


@pytest.mark.parametrize("value, out", [("", True), ("yes", True), ("false", False), (" False ", False)])
def test_the_opt_out_reads_any_value_but_false(value, out):
    assert opted_out({"annotations": {"rwo-failover.io/opt-out": value}}) is out
    assert opted_out({"annotations": {}}) is False
