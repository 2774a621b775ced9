"""Seam repair's pure parts: which status records are task starts, which stored offset a start
resumed from, and which offsets lie where Debezium may skip the rest of an LSN."""

from __future__ import annotations

from typing import Any

from changelake.capture.connect_offsets import StoredOffset
from changelake.capture.seams import TaskStart, resumed_from, seam_xid, task_start
from changelake.kafka_io import Record

RUNNING = {"state": "RUNNING", "worker_id": "w:8083", "generation": 3}


def status(key: str, value: Any, offset: int = 7, at: int = 1000) -> Record:
    return Record("connect-status", 0, offset, key, value, {}, at)


def offset(at: int, connector: str = "shop-postgres", **value: Any) -> StoredOffset:
    return StoredOffset(connector, value, at)


def test_a_running_task_record_of_a_derived_connector_is_a_start() -> None:
    names = {"shop-postgres", "shop-2"}
    assert task_start(names, status("status-task-shop-postgres-0", RUNNING)) == TaskStart(
        "shop-postgres", 0, 0, 7, 1000
    )
    assert task_start(names, status("status-task-shop-2-11", RUNNING)) == TaskStart(
        "shop-2", 11, 0, 7, 1000
    )
    for key, value in [
        ("status-connector-shop-postgres", RUNNING),  # the connector, not a task
        ("status-task-shop-postgres-0", {**RUNNING, "state": "UNASSIGNED"}),
        ("status-task-shop-postgres-0", None),  # deleted
        ("status-task-other-0", RUNNING),  # not derived by this run
        ("status-topic-shop.public.orders:connector-shop-postgres", {"topic": {}}),
    ]:
        assert task_start(names, status(key, value)) is None, key


def test_a_start_resumes_from_the_connectors_last_offset_stored_before_it() -> None:
    start = TaskStart("shop-postgres", 0, 0, 9, 5000)
    offsets = [
        offset(1000, txId=1),
        offset(4000, "other", txId=2),
        offset(4500, txId=3),
        offset(5000, txId=4),
        offset(6000, txId=5),  # stored by the started task
    ]
    found = resumed_from(offsets, start)
    assert found is not None and found.value == {"txId": 4}
    assert resumed_from(offsets[1:2], start) is None  # the connector's first start
    assert resumed_from([*offsets[:3], offset(4800)], start).value == {}  # type: ignore[union-attr]


def test_a_seam_is_an_offset_inside_a_transaction_with_one_event_counted_or_none() -> None:
    inside = {"lsn_proc": 200, "lsn_commit": 100, "lsn": 200, "txId": 42, "messageType": "INSERT"}
    assert seam_xid(offset(1, **inside, lsn_events_processed=1)) == 42
    assert seam_xid(offset(1, **inside)) == 42  # stored by Debezium 3.6: no count
    # The first event of a transaction starts where the last commit ended: same LSN, no commit.
    assert seam_xid(offset(1, **{**inside, "lsn_commit": 200}, lsn_events_processed=1)) == 42
    assert seam_xid(offset(1, **{**inside, "txId": 2**32 + 42}, lsn_events_processed=1)) == 42
    assert seam_xid(offset(1, **inside, lsn_events_processed=2)) is None  # 3.7 counts these
    assert seam_xid(offset(1, **{**inside, "messageType": "COMMIT"})) is None
    old_commit = {k: v for k, v in inside.items() if k != "messageType"} | {"lsn_commit": 200}
    assert seam_xid(offset(1, **old_commit)) is None  # an older Debezium at a commit
    assert seam_xid(offset(1, lsn=200, txId=42)) is None  # nothing streamed yet
    assert seam_xid(offset(1, **inside, snapshot=True)) is None
    assert seam_xid(offset(1)) is None  # a reset
