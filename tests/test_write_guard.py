"""The Writer's guard: once it names a reason (a stop signal, lost leadership), no write starts, and no retry of
a write already under way is sent. Over HTTP, with the real client, against the fixture."""

from __future__ import annotations

from pathlib import Path

from rwo_failover import settings as config
from rwo_failover.act.outcome import Outcome
from rwo_failover.act.writer import Result, Writer
from rwo_failover.kube import Api, load_api_client
from rwo_testkit import fake_cluster as fc
from rwo_testkit.fake_apiserver import Fault


def writer_for(api, tmp_path: Path, guard, **env: str) -> Writer:
    _args, settings = config.load([], {"KUBECONFIG": api.write_kubeconfig(str(tmp_path / "kc")), **env})
    client = Api(load_api_client(settings), settings, sleep=lambda _s: None)
    return Writer(client, False, Outcome(), guard=guard)


def test_no_write_starts_once_the_guard_names_a_reason(api, tmp_path):
    api.add(fc.pod("db-0", "n1"))
    writer = writer_for(api, tmp_path, lambda: "stop requested (SIGTERM)")

    result = writer.delete_pod("default", "db-0", "any-uid", fields={})

    assert result is Result.NOT_ATTEMPTED
    assert api.mutations() == []
    assert writer.outcome.not_attempted == ["force-delete of pod default/db-0 (stop requested (SIGTERM))"]


def test_a_retry_is_not_sent_once_the_guard_names_a_reason(api, tmp_path):
    pod = api.add(fc.pod("db-0", "n1"))
    api.inject(Fault("status", verb="delete", resource="pods", status=503, first=1))

    def guard() -> str | None:  # leadership is lost once the first attempt has reached the server
        return "no longer the leader" if api.mutations() else None

    writer = writer_for(api, tmp_path, guard)
    result = writer.delete_pod("default", "db-0", pod["metadata"]["uid"], fields={})

    assert len(api.mutations()) == 1, "the 503 was answered; the retry must not be sent"
    assert result is Result.FAILED
    assert writer.outcome.failures and "no longer the leader" in writer.outcome.failures[0]


def test_a_retry_after_a_lost_answer_stopped_by_the_guard_is_unconfirmed(api, tmp_path):
    pod = api.add(fc.pod("db-0", "n1"))
    api.inject(Fault("reset", verb="delete", resource="pods", first=1))

    def guard() -> str | None:  # leadership is lost once the first attempt has reached the server
        return "no longer the leader" if api.mutations() else None

    writer = writer_for(api, tmp_path, guard)
    result = writer.delete_pod("default", "db-0", pod["metadata"]["uid"], fields={})

    assert result is Result.UNCONFIRMED, "the first attempt may have landed: only the next pass can tell"
    assert len(api.mutations()) == 1


def pausable_writer(api, tmp_path: Path, live_pause) -> Writer:
    _args, settings = config.load([], {"KUBECONFIG": api.write_kubeconfig(str(tmp_path / "kc"))})
    client = Api(load_api_client(settings), settings, sleep=lambda _s: None)
    return Writer(client, False, Outcome(), guard=lambda: None, live_pause=live_pause)


def test_no_destructive_write_starts_while_the_live_pause_names_a_reason(api, tmp_path):
    pod = api.add(fc.pod("db-0", "n1"))
    writer = pausable_writer(api, tmp_path, lambda: "paused by alice")

    result = writer.delete_pod("default", "db-0", pod["metadata"]["uid"], fields={})

    assert result is Result.NOT_ATTEMPTED
    assert api.mutations() == []
    assert writer.outcome.not_attempted == ["force-delete of pod default/db-0 (paused by alice)"]


def test_the_live_pause_does_not_stop_what_is_not_destructive(api, tmp_path):
    """An Event (or a record of what a paused pass saw) is written whatever the pause says: only a fence, a
    power-off, a taint, a pod or attachment delete waits on it."""
    writer = pausable_writer(api, tmp_path, lambda: "paused by alice")

    event = {"metadata": {"name": "e1", "namespace": "default"}, "reason": "Seen", "type": "Normal",
             "involvedObject": {"kind": "Node", "name": "n1"}}
    result = writer.create_event("default", event)

    assert result is Result.DONE
    assert [m.resource for m in api.mutations()] == ["events"]


def test_a_retry_of_a_destructive_write_is_not_sent_once_the_pause_is_set(api, tmp_path):
    pod = api.add(fc.pod("db-0", "n1"))
    api.inject(Fault("status", verb="delete", resource="pods", status=503, first=1))
    writer = pausable_writer(api, tmp_path, lambda: "paused by alice" if api.mutations() else None)

    result = writer.delete_pod("default", "db-0", pod["metadata"]["uid"], fields={})

    assert len(api.mutations()) == 1, "the pause came after the first attempt: its retry must not be sent"
    assert result is Result.FAILED
    assert writer.outcome.failures and "paused by alice" in writer.outcome.failures[0]
    assert writer.api.retry_guard is None, "the writer's own retry guard is lifted after the write"


def test_the_live_pause_does_not_stop_the_retry_of_what_is_not_destructive(api, tmp_path):
    api.inject(Fault("status", verb="create", resource="events", status=503, first=1))
    writer = pausable_writer(api, tmp_path, lambda: "paused by alice")
    event = {"metadata": {"name": "e1", "namespace": "default"}, "reason": "Seen", "type": "Normal",
             "involvedObject": {"kind": "Node", "name": "n1"}}

    result = writer.create_event("default", event)

    assert result is Result.DONE
    assert [m.resource for m in api.mutations()] == ["events", "events"], "the 503's retry is sent"
