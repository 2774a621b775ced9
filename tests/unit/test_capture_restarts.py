"""What `changelake run` reads from a connector's status to restart a failed capture task."""

from __future__ import annotations

from pipelines.capture.capture_restarts import failed_tasks

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
