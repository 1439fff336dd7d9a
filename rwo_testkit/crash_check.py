"""No test passes when every pass crashes right after observe (issue 37; docs/testing.md).

    python -m rwo_testkit.crash_check            # the fixture tier, slow tests included (`make crash-check`)
    python -m rwo_testkit.crash_check tests/test_judgment.py -k opt_out

Turns the crash switch on (rwo_testkit/crash_switch.py: a .pth file in this venv, so it reaches every Python
process of the venv, reconcile.py run as a subprocess with a test's own environment included), runs pytest,
turns it off, and lists every test that still passed. A test that exercises a pass and passes while every pass
crashes asserts only what must not happen; it fails this check. The tests that exercise no pass at all (a
parser, the settings table, the docs, the chart) are listed in ALLOWED below, each group with its reason.
Exit 0 when every test that passed is one of those; 1 otherwise, naming them. While it runs, every pass run by
this venv crashes: run nothing else with it meanwhile.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
import sysconfig
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from .crash_switch import PTH_LINE, PTH_NAME

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ARGS = ["tests", "--ignore=tests/e2e"]

# Tests that pass with every pass crashing because they run no pass: (node-id pattern, why). A pattern names a
# whole file only when nothing in it runs a pass.
ALLOWED: list[tuple[str, str]] = [(pattern, reason) for reason, patterns in {
    'settings, flags, the environment and start-up refusals: exit 2 before anything is read': [
        'tests/test_config.py::*',
        'tests/test_unsafe_settings.py::*',
        'tests/test_cli.py::test_argument_errors_are_one_line*',
        'tests/test_cli.py::test_boolean_flags_work*',
        'tests/test_cli.py::test_garbage_kubeconfig_exits_2',
        'tests/test_cli.py::test_help_lists_every_setting*',
        'tests/test_cli.py::test_installed_entry_points_run*',
        'tests/test_cli.py::test_kubeconfig_that_is_a_directory*',
        'tests/test_cli.py::test_missing_kubeconfig_exits_2*',
        'tests/test_cli.py::test_unknown_context_exits_2',
        'tests/test_fence_webhook.py::test_a_token_file_that_cannot_be_sent_is_refused_at_start_up*',
        'tests/test_fencing.py::test_fencing_webhook_needs_an_https_url',
        'tests/test_leader.py::test_dry_run_with_leader_election_is_refused*',
        'tests/test_leader.py::test_leader_election_needs_continuous_mode',
        'tests/test_redfish.py::test_a_bmc_map_that_cannot_be_used_is_refused_at_start_up*',
        'tests/test_redfish_attack.py::test_a_ca_that_is_no_certificate_fails_at_start_up',
        'tests/test_secrets.py::test_a_pushgateway_password_with_a_delimiter_stops_the_process_at_start_up*',
        'tests/test_secrets.py::test_a_rejected_url_is_named_without_its_userinfo*',
        'tests/test_secrets.py::test_a_url_whose_password_holds_a_delimiter_is_refused*',
        'tests/test_storm_memory_attack.py::test_start_up_says_the_cool_down_is_off_without_its_namespace',
    ],
    'the pass ends inside observe, as it must (exit 4 or 5 asserted, or 70 on purpose): the crash comes after': [
        'tests/test_cli.py::test_a_list_answer_of_the_wrong_shape_is_a_failed_read_not_a_bug',
        'tests/test_cli.py::test_an_uncaught_exception_exits_70*',
        'tests/test_cli.py::test_rbac_denial_while_reading*',
        'tests/test_cli.py::test_unreachable_api_server_exits_4*',
        'tests/test_liveness.py::test_a_date_header_a_second_past_the_tolerance*',
        'tests/test_liveness.py::test_a_date_header_from_another_clock*',
        'tests/test_liveness.py::test_without_a_date_header*',
        'tests/test_faults.py::test_persistent_503_while_reading_exits_4*',
        'tests/test_faults.py::test_persistent_expired_continue*',
        'tests/test_faults.py::test_retry_after_beyond_the_pass_deadline*',
        'tests/test_deadlines.py::test_a_node_list_trickled_within_every_read_timeout*',
        'tests/test_deadlines.py::test_trickled_headers*',
        'tests/test_judgment.py::test_the_loop_exits_1_after_five_crashes_in_a_row',
    ],
    'what observe reads, and how (requests, pagination, conversion, memory): observe runs whole before the crash': [
        'tests/test_convert_less.py::*',
        'tests/test_whole_lists.py::test_*',
        'tests/test_decode.py::test_a_deep_*',
        'tests/test_decode.py::test_a_fence_and_a_recovery_record_read_the_same*',
        'tests/test_decode.py::test_a_page_with_a_wrong_type*',
        'tests/test_decode.py::test_a_watch_event_of_a_deep_object*',
        'tests/test_decode.py::test_an_answer_that_is_not_utf8*',
        'tests/test_decode.py::test_each_kind_reads_the_same_through_its_struct*',
        'tests/test_scenarios.py::test_the_gets_a_tenant_can_cause_stop_at_100*',
    ],
    "the watch cache, its reflectors and continuous mode's triggers, back-off and shutdown (when a pass starts, "
    "not what it does)": [
        'tests/test_watch.py::test_*',
        'tests/test_watch_progress.py::test_*',
        'tests/test_watch_progress_attack.py::test_*',
        'tests/test_watch_backoff_attack.py::test_*',
        'tests/test_watch_faults.py::test_a_watch_thread_that_outlives_stop*',
        'tests/test_watch_faults.py::test_sigterm_releases_the_leader_lease*',
        'tests/test_no_spin.py::test_*',
        'tests/test_loop_gap_attack.py::test_*',
        'tests/test_live_reads.py::test_a_cache_ahead_of_the_server*',
        'tests/test_convert_attack.py::test_a_tenant_pod_deleted_from_a_watched_node*',
        'tests/test_recovery_reads_attack.py::test_tenant_pods_whose_names_agree_in_300_characters*',
        'tests/test_judgment.py::test_the_stop_signal_handler_takes_no_lock',
    ],
    'leader election, driven directly': [
        'tests/test_leader.py::test_a_dead_leader_is_replaced*',
        'tests/test_leader.py::test_a_leader_lease_that_cannot_be_read*',
        'tests/test_leader.py::test_a_leader_that_cannot_renew*',
        'tests/test_leader.py::test_a_released_lease_is_taken_at_once',
        'tests/test_leader.py::test_one_candidate_wins*',
        'tests/test_leader.py::test_the_election_thread_survives*',
        'tests/test_leader.py::test_two_candidates_writing_at_once*',
    ],
    "the planner, the writer and act's pieces called directly (pure functions, or one write), not a pass": [
        'tests/test_planner_properties.py::*',
        'tests/test_redfish_planner.py::test_*',
        'tests/test_safety.py::test_the_caps_first_namespace_turns*',
        'tests/test_write_guard.py::test_*',
        'tests/test_storm_memory_attack.py::test_a_deposed_leader_writes_no_storm_moment*',
        'tests/test_fuzz_tenants.py::test_a_controller_is_bounded*',
        'tests/test_fuzz_tenants.py::test_any_pod_the_api_server_accepts*',
        'tests/test_fuzz_tenants.py::test_every_event_name_we_write*',
        'tests/test_plan_table.py::test_*',
        'tests/test_fence_lifecycle_attacks.py::test_a_boot_id_with_a_trailing_newline*',
        'tests/test_redfish_attack.py::test_uuids_are_compared_however_written',
        'tests/test_out_of_service.py::test_server_versions_from_every_vendor_parse*',
    ],
    "parsers and the fuzz tier's parser properties: a value or a typed skip for any JSON": [
        'tests/test_fuzz.py::test_a_repeated_events_bump*',
        'tests/test_fuzz.py::test_a_stored_recovery_record_parses*',
        'tests/test_fuzz.py::test_a_webhook_answer_is_believed*',
        'tests/test_fuzz.py::test_every_parser_returns*',
        'tests/test_fuzz.py::test_the_decoder_reads_every_hostile_object*',
        'tests/test_fields_edges.py::*',
        'tests/test_server_clock.py::*',
    ],
    'metrics, health, the Pushgateway and the alert rules': [
        'tests/test_monitoring.py::test_every_alert_links*',
        'tests/test_monitoring.py::test_every_labelled_metric*',
        'tests/test_monitoring.py::test_liveness_fails_when_no_pass_finishes_in_time',
        'tests/test_monitoring.py::test_metric_names*',
        'tests/test_monitoring.py::test_promtool_checks*',
        'tests/test_monitoring.py::test_the_metric_table*',
        'tests/test_monitoring.py::test_the_prometheusrule*',
        'tests/test_failover_histogram.py::test_a_read_back_that_does_not_hold_up*',
        'tests/test_failover_histogram.py::test_the_histogram_has_no_per_pod*',
        'tests/test_readback_memory.py::test_*',
        'tests/test_deadlines.py::test_a_trickling_pushgateway*',
        'tests/test_fence_identity.py::test_fences_left_in_place_are_a_gauge*',
    ],
    'deployables, the chart, the Makefile, the docs, the architecture, releases and the test doubles themselves': [
        'tests/test_chart.py::*',
        'tests/test_chart_pods.py::test_a_*',
        'tests/test_chart_pods.py::test_affinity*',
        'tests/test_chart_pods.py::test_an_existing*',
        'tests/test_chart_pods.py::test_pod_*',
        'tests/test_chart_pods.py::test_the_*',
        'tests/test_chart_pods.py::test_without_secret_files*',
        'tests/test_chart_rbac.py::test_the_notes_name_the_lease*',
        'tests/test_chart_rbac.py::test_the_rendered_rbac_grants_no_more*',
        'tests/test_deploy.py::test_cronjob_schedule*',
        'tests/test_deploy.py::test_each_manifest_states*',
        'tests/test_deploy.py::test_every_*',
        'tests/test_deploy.py::test_hardening*',
        'tests/test_deploy.py::test_never_tolerates*',
        'tests/test_deploy.py::test_the_*',
        'tests/test_makefile.py::test_a_*',
        'tests/test_makefile.py::test_after_a_python_upgrade*',
        'tests/test_makefile.py::test_each_make_target_runs[[]c*',
        'tests/test_makefile.py::test_each_make_target_runs[[]e2e]',
        'tests/test_makefile.py::test_each_make_target_runs[[]lint-imports]',
        'tests/test_makefile.py::test_each_make_target_runs[[]mutants]',
        'tests/test_makefile.py::test_each_make_target_runs[[]quick]',
        'tests/test_makefile.py::test_each_make_target_runs[[]test]',
        'tests/test_makefile.py::test_every_phony_target*',
        'tests/test_makefile.py::test_python_below_3_11*',
        'tests/test_docs.py::*',
        'tests/test_architecture.py::*',
        'tests/test_release.py::*',
        'tests/test_control_plane.py::*',
        'tests/test_fake_apiserver.py::*',
        'tests/test_crash_check.py::*',
        'tests/test_faults.py::test_fraction_faults_are_seeded_and_reproducible',
        'tests/test_rbac.py::test_no_rule_grants_secrets*',
        'tests/test_rbac.py::test_rbac_grants_exactly_the_calls_in_the_code',
        'tests/test_packaging.py::test_the_project_declares*',
        'tests/test_packaging.py::test_the_wheel_ships_the_runtime_only',
    ],
    "a pass in a fresh venv built from the wheel or the image's requirements, which the switch cannot reach (it "
    "lives in this venv); each asserts the pass's exit 0 and what it did": [
        'tests/test_packaging.py::test_the_wheel_installs_in_a_fresh_venv_and_runs_a_pass',
        'tests/test_deploy.py::test_deployment_command_loops_until_sigterm',
        'tests/test_deploy.py::test_container_command_runs_a_real_pass',
    ],
    'the suite-wide check that runs last: no planted secret in any log line': [
        'tests/test_secrets.py::test_no_planted_secret_appears_in_any_log_line_of_the_whole_suite',
    ],
}.items() for pattern in patterns]


def passed_tests(junit: Path) -> tuple[list[str], int]:
    """The node ids of the tests that passed, and how many ran, from pytest's JUnit XML."""
    passed, ran = [], 0
    for case in ET.parse(junit).iter("testcase"):
        ran += 1
        if any(child.tag in ("failure", "error", "skipped") for child in case):
            continue
        module = case.get("classname", "").split(".")
        # classname is "tests.test_x" or "tests.test_x.TestClass"; the file is the first part that starts "test_"
        cut = next((i for i, part in enumerate(module) if part.startswith("test_")), len(module) - 1)
        path = "/".join(module[: cut + 1]) + ".py"
        inner = module[cut + 1:]
        passed.append("::".join([path, *inner, case.get("name", "")]))
    return passed, ran


def why_allowed(test: str) -> str:
    return next((reason for pattern, reason in ALLOWED if fnmatch.fnmatchcase(test, pattern)), "")


def _switch_reaches_a_clean_process() -> None:
    """A Python process of this venv, started with an empty environment, has the switch on."""
    probe = ("import rwo_failover.run.runner as r, sys; "
             "sys.exit(0 if getattr(r.observe, 'crash_switch', False) else 3)")
    proc = subprocess.run([sys.executable, "-c", probe], env={}, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    if proc.returncode != 0:
        raise SystemExit(f"crash-check: the crash switch did not reach a clean process: {proc.stderr.strip()}")


def main(argv: list[str]) -> int:
    pth = Path(sysconfig.get_path("purelib")) / PTH_NAME
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        pth.write_text(PTH_LINE, encoding="utf-8")
        try:
            _switch_reaches_a_clean_process()
            print(f"crash-check: every pass crashes right after observe while this runs ({pth})", flush=True)
            subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                            f"--junitxml={junit}", *(argv or DEFAULT_ARGS)], cwd=ROOT,
                           env={**os.environ, "RWO_CRASH_AFTER_OBSERVE": "1"}, check=False)
        finally:
            pth.unlink(missing_ok=True)
        passed, ran = passed_tests(junit)
    allowed = {test: why_allowed(test) for test in passed}
    wrong = sorted(test for test, reason in allowed.items() if not reason)
    groups: dict[str, int] = {}
    for reason in allowed.values():
        if reason:
            groups[reason] = groups.get(reason, 0) + 1
    unused = [pattern for pattern, _ in ALLOWED if not any(fnmatch.fnmatchcase(t, pattern) for t in passed)]
    print(f"\ncrash-check: {ran} tests ran with every pass crashing; {len(passed)} passed, "
          f"{len(passed) - len(wrong)} of them run no pass:")
    for reason, count in sorted(groups.items(), key=lambda item: -item[1]):
        print(f"  {count:5d}  {reason}")
    if unused and not argv:
        print("crash-check: these ALLOWED patterns matched no passing test (stale? remove them):")
        for pattern in unused:
            print(f"  {pattern}")
    if wrong:
        print(f"crash-check: {len(wrong)} tests passed although every pass crashed: each must assert what a pass "
              "has to do (exit code, skip reason, Event), or run no pass:")
        for test in wrong:
            print(f"  {test}")
        return 1
    print("crash-check: no test that runs a pass passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
