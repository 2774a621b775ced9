"""Key updates whose create never reached the topic: found from a batch's records and headers,
with a local Spark session and no services."""

from __future__ import annotations

from pyspark.sql import SparkSession

from changelake.apply.batch_stats import record_stats
from changelake.changelog.decode import envelopes
from changelake.changelog.key_changes import KeyChange, Mark, unpaired

NEW, OLD = "__debezium.newkey", "__debezium.oldkey"
RAW = (
    "topic string, partition int, offset long, key binary, value binary, "
    "headers array<struct<key:string, value:binary>>"
)


def delete(offset: int, new: str = '{"id":7}') -> Mark:
    return Mark(0, offset, False, new, None)


def tombstone(offset: int, new: str = '{"id":7}') -> Mark:
    return Mark(0, offset, True, new, None)


def create(offset: int, old: str = '{"id":1}') -> Mark:
    return Mark(0, offset, False, None, old)


def test_a_key_update_with_its_create_in_the_batch_is_paired() -> None:
    found = unpaired([delete(10), tombstone(11), create(12)], {"0": 20})
    assert found.lost == [] and found.undecided == []
    # without tombstones (tombstones.on.delete=false) the create comes right after
    assert unpaired([delete(10), create(11)], {"0": 20}).lost == []


def test_a_delete_followed_by_other_records_lost_its_create() -> None:
    found = unpaired([delete(10), tombstone(11)], {"0": 20})
    assert found.lost == [KeyChange(0, 10, {"id": 7})] and found.undecided == []
    # a create two records later belongs to the next key update, not to this one
    found = unpaired([delete(10), tombstone(11), delete(13), tombstone(14), create(15)], {"0": 20})
    assert found.lost == [KeyChange(0, 10, {"id": 7})]


def test_a_delete_at_the_end_of_the_batch_is_undecided() -> None:
    found = unpaired([delete(18), tombstone(19)], {"0": 20})
    assert found.lost == [] and found.undecided == [KeyChange(0, 18, {"id": 7})]
    assert unpaired([delete(17), tombstone(18)], {"0": 20}).undecided == []  # 19 is in the batch


def test_the_new_key_is_read_with_or_without_its_schema() -> None:
    with_schema = '{"schema":{"type":"struct"},"payload":{"shop":9,"sku":"S1"}}'
    (change,) = unpaired([delete(1, with_schema)], {"0": 9}).lost
    assert change.new_key == {"shop": 9, "sku": "S1"}
    assert change.describe(["shop", "sku"]) == "shop=9, sku='S1'"


def test_headers_reach_the_batch_marks(spark: SparkSession) -> None:
    value = b'{"schema":{"type":"struct"},"payload":{"op":"d"}}'
    rows = [
        ("t", 0, 5, b"{}", value, [(NEW, b'{"id":7}'), ("__debezium.context.taskId", b"0")]),
        ("t", 0, 6, b"{}", None, [(NEW, b'{"id":7}')]),
        ("t", 0, 7, b"{}", value, [(OLD, b'{"id":1}')]),
        ("t", 0, 8, b"{}", value, []),
    ]
    env = envelopes(spark.createDataFrame(rows, RAW))
    (stats,) = record_stats(env).values()
    assert stats.offsets == {"0": 9} and stats.records == 4
    assert sorted(stats.marks, key=lambda m: m.offset) == [
        Mark(0, 5, False, '{"id":7}', None),
        Mark(0, 6, True, '{"id":7}', None),
        Mark(0, 7, False, None, '{"id":1}'),
    ]
    # read without headers (the snapshot's batch read), no record is marked
    plain = envelopes(spark.createDataFrame(rows, RAW).drop("headers"))
    assert record_stats(plain)["t"].marks == []
