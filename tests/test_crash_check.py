"""The crash switch and its check (rwo_testkit/crash_switch.py, crash_check.py; docs/testing.md): the switch makes a
pass crash right after observe, and the check reads pytest's JUnit XML right. `make crash-check` runs them on the
whole fixture tier; here only their parts, since while the switch is on every pass of this venv crashes."""

from __future__ import annotations

import pytest

from rwo_testkit import crash_check, crash_switch


def test_the_switch_observes_first_then_crashes():
    seen = []
    wrapped = crash_switch.observe_then_crash(lambda *args: seen.append(args))
    with pytest.raises(RuntimeError, match="crashes right after observe"):
        wrapped("api", "settings")
    assert seen == [("api", "settings")], "the real observe ran, every read of the pass made"


def test_only_tests_that_passed_are_listed_by_node_id(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text("""<testsuites><testsuite>
      <testcase classname="tests.test_a" name="test_ok[x]" time="0.1"/>
      <testcase classname="tests.test_a" name="test_bad" time="0.1"><failure message="boom"/></testcase>
      <testcase classname="tests.test_b" name="test_skip" time="0"><skipped message="no"/></testcase>
      <testcase classname="tests.test_c.TestThing" name="runTest" time="0.1"/>
      <testcase classname="tests.test_d" name="test_err" time="0.1"><error message="setup"/></testcase>
    </testsuite></testsuites>""")
    assert crash_check.passed_tests(junit) == (["tests/test_a.py::test_ok[x]", "tests/test_c.py::TestThing::runTest"],
                                               5)


def test_a_test_that_runs_a_pass_is_never_allowed_to_pass_by_a_pattern():
    assert crash_check.why_allowed("tests/test_config.py::test_anything")
    assert not crash_check.why_allowed(
        "tests/test_judgment.py::test_an_opted_out_claim_of_a_pod_that_is_not_stuck_blocks_the_taint")
    assert not crash_check.why_allowed("tests/test_opt_out_values.py::test_false_opts_nothing_out[false-pod]")
