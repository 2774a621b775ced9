"""What `changelake run` reads from a connector's status to restart a failed capture task."""

from __future__ import annotations

import pytest

from changelake.capture.capture_restarts import failed_tasks
from changelake.capture.connectors import failure_text, wait_running
from changelake.exceptions import ChangelakeError

TRACE = """io.debezium.DebeziumException: Failed to create TypeRegistry
\tat io.debezium.connector.postgresql.PostgresConnectorTask.start(PostgresConnectorTask.java:125)
Caused by: io.debezium.DebeziumException: Couldn't initialize type registry
Caused by: org.postgresql.util.PSQLException: The connection attempt failed.
Caused by: java.net.SocketException: Connection reset
\t... 14 more"""


def test_a_failed_task_is_named_with_its_root_cause() -> None:
    status = {
        "connector": {"state": "RUNNING"},
        "tasks": [
            {"id": 0, "state": "FAILED", "trace": TRACE},
            {"id": 1, "state": "RUNNING"},
            {"id": 2, "state": "FAILED", "trace": "org.example.Boom: no causes\n\tat x"},
        ],
    }
    assert failed_tasks(status) == [
        (0, "java.net.SocketException: Connection reset"),
        (2, "org.example.Boom: no causes"),
    ]


def test_running_or_unassigned_tasks_are_left_alone() -> None:
    assert failed_tasks({"tasks": [{"id": 0, "state": "RUNNING"}]}) == []
    assert failed_tasks({"tasks": [{"id": 0, "state": "UNASSIGNED"}]}) == []
    assert failed_tasks({"connector": {"state": "RUNNING"}}) == []


class ScriptedConnect:
    """Connect's status answers, one per read (the last repeats)."""

    def __init__(self, *states: str, trace: str = TRACE) -> None:
        self.states, self.trace = list(states), trace

    def get(self, _path: str) -> dict[str, object]:
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        task = {"id": 0, "state": state, "trace": self.trace if state == "FAILED" else None}
        return {"connector": {"state": "RUNNING"}, "tasks": [task]}


def test_apply_waits_through_the_stale_failure_of_a_task_it_restarted() -> None:
    restarted = failure_text(ScriptedConnect("FAILED").get(""))  # what apply saw, then restarted
    api = ScriptedConnect("FAILED", "RESTARTING", "RUNNING")
    wait_running(api, "shop", 30, lambda _: None, restarted=restarted)  # type: ignore[arg-type]


def test_a_new_failure_or_one_still_there_at_the_deadline_is_reported() -> None:
    restarted = failure_text(ScriptedConnect("FAILED").get(""))
    other = ScriptedConnect("RESTARTING", "FAILED", trace="org.example.Other: boom")
    with pytest.raises(ChangelakeError, match="Other: boom"):
        wait_running(other, "shop", 30, lambda _: None, restarted=restarted)  # type: ignore[arg-type]
    with pytest.raises(ChangelakeError, match="Connection reset"):
        wait_running(ScriptedConnect("FAILED"), "shop", 0, lambda _: None, restarted=restarted)  # type: ignore[arg-type]
