"""Capture's truth: a connector or task not RUNNING, or silent heartbeats, make the tables it feeds
`stalled` in `status`, the run's state file and its metrics, with Debezium's reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from changelake.apply import capture_watch
from changelake.apply.capture_watch import CaptureWatch
from changelake.apply.metrics import RunMetrics
from changelake.apply.pipeline_file import TableState, write_state
from changelake.apply.run_state import TableJob
from changelake.capture.capture_health import (
    STALE_MIN_S,
    Stall,
    problem_lines,
    stale_heartbeat,
    stall_of,
)
from changelake.capture.connect_api import ConnectApiError
from changelake.read.status import UNHEALTHY, exit_code, with_capture
from changelake.settings import Settings
from changelake.tables import TableRef

GONE = (
    "org.apache.kafka.connect.errors.ConnectException: An exception occurred in the change event"
    " producer. This connector will be stopped.\n\tat io.debezium.X\nCaused by:"
    " io.debezium.DebeziumException: The connector is trying to read change stream starting at"
    " PostgresOffsetContext [lsn=LSN{0/1AA2D48}], but this is no longer available on the server."
    " Reconfigure the connector to use a snapshot mode when needed."
)


def _status(connector: str = "RUNNING", *tasks: tuple[str, str | None]) -> dict[str, object]:
    return {
        "connector": {"state": connector},
        "tasks": [{"id": i, "state": s, "trace": t} for i, (s, t) in enumerate(tasks)],
    }


def test_a_task_failed_because_its_slot_is_gone_says_so_and_what_to_do() -> None:
    stall = stall_of("shop", _status("RUNNING", ("FAILED", GONE)))
    assert stall is not None
    assert "the position Connect stored for shop is gone from Postgres" in stall.sentence
    assert "slot was dropped or recreated" in stall.sentence
    assert "`changelake run` re-syncs it by itself" in stall.next_step
    assert "\n" not in str(stall)


def test_each_way_of_not_capturing_is_a_stall_and_only_all_running_is_none() -> None:
    assert stall_of("shop", _status("RUNNING", ("RUNNING", None))) is None
    unknown = stall_of("shop", None)
    assert unknown is not None and "not registered" in unknown.sentence
    assert "connectors apply" in unknown.next_step
    paused = stall_of("shop", _status("PAUSED", ("PAUSED", None)))
    assert paused is not None and "connector shop is PAUSED" in paused.sentence
    assert "/connectors/shop/resume" in paused.next_step
    stopped = stall_of("shop", _status("STOPPED"))
    assert stopped is not None and "is STOPPED" in stopped.sentence
    waiting = stall_of("shop", _status("RUNNING", ("RUNNING", None), ("UNASSIGNED", None)))
    assert waiting is not None and "task 1 is UNASSIGNED" in waiting.sentence
    none = stall_of("shop", _status("RUNNING"))
    assert none is not None and "no task runs" in none.sentence
    failed = stall_of("shop", {"connector": {"state": "FAILED", "trace": "x.Boom: no config"}})
    assert failed is not None and "connector shop failed: x.Boom: no config" in failed.sentence


def test_a_running_connector_whose_heartbeats_stopped_is_stale() -> None:
    assert stale_heartbeat("shop", 10.0, None) is None  # none written yet: no figure
    assert stale_heartbeat("shop", 10.0, 30.0) is None
    assert stale_heartbeat("shop", 10.0, STALE_MIN_S - 1) is None  # never under the floor
    stale = stale_heartbeat("shop", 10.0, STALE_MIN_S + 5)
    assert stale is not None and "wrote no heartbeat for 125s" in stale.sentence
    assert stale_heartbeat("shop", 60.0, 300.0) is None  # six intervals: 360 s


def test_status_shows_stalled_tables_and_exits_needing_a_person() -> None:
    stall = stall_of("shop", _status("RUNNING", ("FAILED", GONE)))
    assert stall is not None
    running = with_capture({"state": "running", "error": None}, stall)
    assert running["state"] == "stalled" and running["capture"] == "stalled"
    assert running["error"] == stall.sentence
    # A table stopped on its own keeps its own error, and says its capture stalled too.
    stopped = with_capture({"state": "stopped", "error": "its schema"}, stall)
    assert (stopped["state"], stopped["error"], stopped["capture"]) == (
        "stopped",
        "its schema",
        "stalled",
    )
    assert with_capture({"state": "running", "error": None}, None)["capture"] == "running"
    lines = problem_lines({"shop": stall}, {"orders": "shop", "customers": "shop", "x": "other"})
    assert lines == [
        f"capture stalled: {stall.sentence}; tables customers, orders get no changes:"
        f" {stall.next_step}"
    ]
    report = {
        "pipeline": {"running": True},
        "tables": {"orders": running},
        "problems": lines,
    }
    assert exit_code(report) == UNHEALTHY


def _job(name: str, state: TableState) -> TableJob:
    return TableJob(TableRef("public", name, f"shop.public.{name}", "shop", "slot"), state=state)


def test_the_run_s_state_file_and_metrics_show_stalled_tables(tmp_path: Path) -> None:
    jobs = {"orders": _job("orders", TableState.RUNNING)}
    jobs["lines"] = _job("lines", TableState.STOPPED)
    jobs["lines"].error = "its own"
    gone = Stall("shop", "capture gone", "apply it", "slot_missing")
    stalled = {"orders": gone, "lines": gone}
    path = tmp_path / "pipeline.json"
    write_state(path, "now", jobs, tmp_path / "views.json", stalled=stalled)
    shown = json.loads(path.read_text())["tables"]
    assert shown["orders"] == {"state": "stalled", "error": "capture gone"}
    assert shown["lines"] == {"state": "stopped", "error": "its own"}

    registry = CollectorRegistry()
    registry.register(RunMetrics(jobs, dict, dict, lambda: stalled))
    text = generate_latest(registry).decode()
    assert 'changelake_table_state{state="stalled",table="orders"} 1.0' in text
    assert 'changelake_table_state{state="running",table="orders"} 0.0' in text
    assert 'changelake_capture_stalled{cause="slot_missing",connector="shop"} 1.0' in text


class _Connect:
    """Connect's answers to a run's look at one connector, in turn."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)

    def get(self, _path: str) -> object:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def request(self, _method: str, _path: str) -> None:
        return None


def test_the_run_notes_when_capture_stalls_and_when_it_runs_again(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    clock = iter(range(0, 1000, 10))
    jobs = {t: _job(t, TableState.RUNNING) for t in ("orders", "lines")}
    monkeypatch.setattr(capture_watch, "slot_troubles", lambda *_: {})  # slot_trouble's tests
    watch = CaptureWatch(settings, said.append, jobs)
    watch.restarts.clock = lambda: float(next(clock))
    watch.restarts.api = _Connect(  # type: ignore[assignment]
        _status("RUNNING", ("FAILED", GONE)),
        _status("RUNNING", ("FAILED", GONE)),
        ConnectApiError(404, "no such connector"),
        _status("RUNNING", ("RUNNING", None)),
        _status("RUNNING", ("RUNNING", None)),
    )
    assert watch.tick()  # stalled: explained, not the trace
    assert "gone from Postgres" in watch.stalled()["orders"].sentence
    assert watch.stalled().keys() == {"orders", "lines"}
    assert not watch.tick()  # the same stall: said once
    stalled = [line for line in said if "capture stalled" in line]
    assert len(stalled) == 1 and "tables lines, orders STALLED" in stalled[0]
    assert watch.tick()  # another cause: said again
    assert "not registered" in watch.stalled()["orders"].sentence
    assert watch.tick() and watch.stalled() == {}
    assert not watch.tick()
    again = [line for line in said if "capture running again" in line]
    assert again == ["capture running again: connector shop feeds lines, orders"]


def test_the_run_says_a_restore_once_and_keeps_saying_it(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source behind the lake is said once though its WAL position (in the sentence) moves,
    and stays said when the source writes past the lake again: the lake still holds changes the
    source lost."""
    said: list[str] = []
    jobs = {"orders": _job("orders", TableState.RUNNING)}
    looks = iter(
        [
            {
                "shop": Stall(
                    "shop", "db is at WAL 0/10, behind 0/20", "rebuild", "source_behind_lake"
                )
            },
            {
                "shop": Stall(
                    "shop", "db is at WAL 0/18, behind 0/20", "rebuild", "source_behind_lake"
                )
            },
            {},  # past the lake's LSN again
        ]
    )
    monkeypatch.setattr(capture_watch, "slot_troubles", lambda *_: next(looks))
    clock = iter(range(0, 1000, 20))
    watch = CaptureWatch(settings, said.append, jobs, clock=lambda: float(next(clock)))
    watch.restarts.next_check = float("inf")  # Connect's look is the other test's
    assert watch.tick()
    assert not watch.tick() and not watch.tick()
    (line,) = [x for x in said if "capture" in x]  # said once, and never "running again"
    assert "capture stalled: db is at WAL 0/10, behind 0/20: rebuild; tables orders" in line
    assert watch.stalled()["orders"].cause == "source_behind_lake"
