"""Postgres → Debezium → compacted Kafka topics, checked event by event on the real stack."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from changelake import kafka_io
from tests.support import changelake, wait_for

pytestmark = pytest.mark.stack
PLACEHOLDER = "__debezium_unavailable_value"
LONG_NOTES = "toast " * 2000  # 12 KB: out of line under STORAGE EXTERNAL


def records(bootstrap: str, topic: str, at_least: int) -> list[kafka_io.Record]:
    def enough() -> list[kafka_io.Record] | None:
        if topic not in kafka_io.list_topics(bootstrap, topic):
            return None
        found = list(kafka_io.read(bootstrap, topic))
        return found if len(found) >= at_least else None

    result: list[kafka_io.Record] = wait_for(enough, 90, f"{at_least} records on {topic}")
    return result


def event(record: kafka_io.Record) -> tuple[str, Any, dict[str, Any] | None]:
    """(op, key, row) where row is `after`, or `before` for a delete; op 'tombstone' for nulls."""
    payload = record.payload
    if payload is None:
        return "tombstone", record.key_payload, None
    row = payload["after"] if payload["after"] is not None else payload["before"]
    return payload["op"], record.key_payload, row


def test_snapshot_then_every_kind_of_change_arrives_in_order(
    admin_dsn: str, bootstrap: str, capture: Callable[[str], str], unique: str
) -> None:
    table = f"cdc_{unique}"
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE public.{table} (LIKE public.customers INCLUDING ALL)")
        conn.execute(
            f"INSERT INTO public.{table} (id, email, name, country, balance, notes)"
            " VALUES (1, 'a@x', 'Zoë', 'DE', -12.50, NULL), (2, 'b@x', '渡辺', 'JP', 0.00, %s),"
            " (3, 'c@x', 'C', 'FR', 99999.99, 'short')",
            (LONG_NOTES,),
        )
    prefix = capture(f"public.{table}")
    topic = f"{prefix}.public.{table}"
    snapshot = records(bootstrap, topic, 3)
    assert [event(r)[:2] for r in snapshot] == [
        ("r", {"id": 1}),
        ("r", {"id": 2}),
        ("r", {"id": 3}),
    ]
    rows = {event(r)[1]["id"]: event(r)[2] for r in snapshot}
    assert rows[1]["name"] == "Zoë" and rows[2]["name"] == "渡辺"
    assert Decimal(str(rows[1]["balance"])) == Decimal("-12.50")
    assert Decimal(str(rows[3]["balance"])) == Decimal("99999.99")
    assert rows[2]["notes"] == LONG_NOTES and rows[1]["notes"] is None

    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f"INSERT INTO public.{table} (id, email, balance) VALUES (4, 'd@x', 1.05)")
        conn.execute(f"UPDATE public.{table} SET balance = 7.25 WHERE id = 2")  # notes untouched
        conn.execute(f"DELETE FROM public.{table} WHERE id = 3")
        conn.execute(f"UPDATE public.{table} SET id = 100 WHERE id = 1")  # a primary-key change
        conn.execute(f"TRUNCATE public.{table}")

    changes = records(bootstrap, topic, 3 + 8)[3:]
    truncate = changes[-1].payload
    assert truncate is not None and truncate["op"] == "t"
    assert [event(r)[:2] for r in changes] == [
        ("c", {"id": 4}),
        ("u", {"id": 2}),
        ("d", {"id": 3}),
        ("tombstone", {"id": 3}),
        ("d", {"id": 1}),
        ("tombstone", {"id": 1}),
        ("c", {"id": 100}),
        # Keyed by our KeyTruncates SMT: a compacted topic refuses a key-less record.
        ("t", {"truncate_lsn": truncate["source"]["lsn"]}),
    ]
    inserted, updated = event(changes[0])[2], event(changes[1])[2]
    assert inserted and Decimal(str(inserted["balance"])) == Decimal("1.05")
    assert updated and Decimal(str(updated["balance"])) == Decimal("7.25")
    # The untouched TOASTed value reaches Kafka as Debezium's placeholder, never as data.
    assert updated["notes"] == PLACEHOLDER
    deleted = event(changes[2])[2]
    assert deleted and deleted["id"] == 3
    moved = event(changes[6])[2]
    assert moved and moved["email"] == "a@x" and moved["name"] == "Zoë"
    lsns = [r.payload["source"]["lsn"] for r in changes if r.payload is not None]
    assert lsns == sorted(lsns), "changes must arrive in LSN order"


def one_row_table(admin_dsn: str, table: str) -> str:
    """public.`table` (id, v) holding the row (1, 'x')."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE public.{table} (id bigint PRIMARY KEY, v text)")
        conn.execute(f"INSERT INTO public.{table} VALUES (1, 'x')")
    return table


def test_table_topics_are_compacted_and_metadata_topics_are_not(
    admin_dsn: str, bootstrap: str, capture: Callable[[str], str], unique: str, tmp_path: Path
) -> None:
    table = one_row_table(admin_dsn, f"cfg_{unique}")
    prefix = capture(f"public.{table}")
    records(bootstrap, f"{prefix}.public.{table}", 1)
    topic = f"{prefix}.public.{table}"
    config = kafka_io.topic_config(bootstrap, topic)
    assert config["cleanup.policy"] == "compact"
    # A delete event stays a day before compaction may drop it for its tombstone: a pipeline
    # that lags (a restart, an outage) still reads the delete, not only the key's tombstone.
    assert config["min.compaction.lag.ms"] == str(24 * 3600 * 1000)
    # A topic created before the file asked for that gets it on the next `connectors apply`.
    kafka_io.set_topic_config(bootstrap, topic, {"min.compaction.lag.ms": "0"})
    (path,) = (tmp_path / "connectors").glob("*.json")
    applied = changelake("connectors", "apply", str(path)).stdout
    assert f"{topic}: set min.compaction.lag.ms=86400000" in applied
    assert kafka_io.topic_config(bootstrap, topic)["min.compaction.lag.ms"] == "86400000"
    wait_for(
        lambda: kafka_io.list_topics(bootstrap, f"{prefix}.transaction"), 60, "transaction topic"
    )
    assert kafka_io.topic_config(bootstrap, f"{prefix}.transaction")["cleanup.policy"] == "delete"


def test_a_deleted_connector_applied_again_starts_with_a_snapshot(
    admin_dsn: str, bootstrap: str, capture: Callable[[str], str], unique: str, tmp_path: Path
) -> None:
    # Connect keeps a deleted connector's offsets: without deleting them too, the same file
    # applied again resumed from a position the dropped slot no longer has, and failed.
    table = one_row_table(admin_dsn, f"again_{unique}")
    prefix = capture(f"public.{table}")
    topic = f"{prefix}.public.{table}"
    assert [event(r)[:2] for r in records(bootstrap, topic, 1)] == [("r", {"id": 1})]
    (path,) = (tmp_path / "connectors").glob("*.json")
    name = json.loads(path.read_text())["name"]
    deleted = changelake("connectors", "delete", name, "--drop-slot", "--yes").stdout
    assert "with the source offsets Connect stored for it" in deleted
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f"INSERT INTO public.{table} VALUES (2, 'y')")  # while nothing captures
    changelake("connectors", "apply", str(path))
    again = records(bootstrap, topic, 3)
    assert [event(r)[:2] for r in again[1:]] == [("r", {"id": 1}), ("r", {"id": 2})]


def test_records_gone_before_they_were_applied_are_named(bootstrap: str, unique: str) -> None:
    """An event table's topic keeps its records for a week (cleanup.policy=delete): a pipeline
    stopped longer, or records deleted, leaves a gap Spark's reader would skip without a word.
    The table stops instead, naming the gap (guards.topic_problem, at start and while it runs)."""
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import NewTopic

    from changelake.apply.guards import topic_problem

    topic = f"retained_{unique}"
    admin = kafka_io.admin(bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "delete"})])[
        topic
    ].result()
    try:
        producer = Producer({"bootstrap.servers": bootstrap})
        for n in range(10):
            producer.produce(topic, key=str(n), value=str(n))
        assert producer.flush(30) == 0
        admin.delete_records([TopicPartition(topic, 0, 6)])[TopicPartition(topic, 0, 6)].result()
        assert topic_problem(bootstrap, topic, {"0": 4}) == (
            f"its topic {topic} lost offsets 4 to 5 of partition 0 before they were applied "
            "(retention, or records deleted): 2 records are missing from the lake"
        )
        assert topic_problem(bootstrap, topic, {"0": 6}) is None  # applied up to the gap
        assert topic_problem(bootstrap, topic, {"0": 10}) is None
    finally:
        kafka_io.delete_topics(bootstrap, [topic])
