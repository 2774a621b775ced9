"""A batch's decoding across batches of one stream: each schema version is fetched from Kafka
once, and the batch's aggregations count its bad records (what lets the apply skip a separate
count), with a local Spark session."""

from __future__ import annotations

import json

from pyspark.sql import SparkSession

from pipelines.apply.batch import batch_stats
from pipelines.changelog.batch import decode_batch
from pipelines.changelog.decode import DEFAULT_PLACEHOLDER, Version, envelopes

RAW = "topic string, partition int, offset long, key binary, value binary"
ROW = {
    "type": "struct",
    "optional": True,
    "name": "p.public.t.Value",
    "fields": [
        {"type": "int32", "optional": False, "field": "id"},
        {"type": "string", "optional": True, "field": "name"},
    ],
}
VALUE_SCHEMA = {
    "type": "struct",
    "name": "p.public.t.Envelope",
    "optional": False,
    "fields": [
        {**ROW, "field": "before"},
        {**ROW, "field": "after"},
        {"type": "struct", "fields": [], "optional": False, "field": "source"},
        {"type": "string", "optional": False, "field": "op"},
    ],
}
KEY_SCHEMA = {
    "type": "struct",
    "name": "p.public.t.Key",
    "optional": False,
    "fields": [{"type": "int32", "optional": False, "field": "id"}],
}


def record(offset: int, key: int, name: str) -> tuple[str, int, int, bytes, bytes]:
    payload = {"before": None, "after": {"id": key, "name": name}, "op": "c"}
    payload["source"] = {"lsn": 1000 + offset, "ts_us": 1, "ts_ms": 1}
    k = {"schema": KEY_SCHEMA, "payload": {"id": key}}
    v = {"schema": VALUE_SCHEMA, "payload": payload}
    compact = {"separators": (",", ":")}
    return ("t", 0, offset, json.dumps(k, **compact).encode(), json.dumps(v, **compact).encode())  # type: ignore[arg-type]


def test_a_schema_version_is_fetched_once_per_stream(spark: SparkSession) -> None:
    records = {o: record(o, o % 3, f"n{o}") for o in range(6)}
    fetched: list[int] = []

    def fetch(partition: int, offset: int) -> tuple[bytes | None, bytes | None]:
        fetched.append(offset)
        return records[offset][3], records[offset][4]

    known: dict[int, Version] = {}
    for batch in ([0, 1, 2], [3, 4], [5]):
        raw = spark.createDataFrame([records[o] for o in batch], RAW)
        decoded = decode_batch(envelopes(raw), "t", DEFAULT_PLACEHOLDER, fetch, known)
        assert decoded.key == ("id",) and decoded.columns.names == ["id", "name"]
    assert fetched == [0] and len(known) == 1


def test_the_batch_stats_count_records_changes_and_bad_records(spark: SparkSession) -> None:
    rows = [
        record(0, 1, "a"),
        record(1, 2, "b"),
        ("t", 0, 2, b"{}", b"not json"),
        record(3, 1, "c"),
    ]
    env = envelopes(spark.createDataFrame(rows, RAW))
    decoded = decode_batch(env, "t", DEFAULT_PLACEHOLDER, lambda p, o: (rows[o][3], rows[o][4]))
    stats = batch_stats(env, decoded)
    assert (stats.records, stats.changes, stats.bad) == (4, 3, 1)
    assert stats.offsets == {"0": 4} and stats.max_lsn == 1003
    assert decoded.errors.count() == stats.bad
