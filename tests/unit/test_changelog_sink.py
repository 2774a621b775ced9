"""The changelog's appends record what they cover and take new columns, and compaction's delete
of the epochs it folded leaves later epochs and the covered offsets intact. A local Spark
session and Delta tables under tmp_path; no services."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from changelake.lake.commits import CommitMeta, latest_commit
from changelake.lake.layout import APPENDED_OFTEN, changelog_of
from changelake.sinks.changelog import ChangelogSink

ROWS = "id long, v string, _cdc_lsn long, _cdc_op string, _kafka_partition int, _kafka_offset long"


def meta(offset: int, lsn: int) -> CommitMeta:
    return CommitMeta("append", "p.public.t", {"0": offset}, lsn, None, ("id",), 2)


def test_appends_new_columns_and_dropped_epochs(spark: SparkSession, tmp_path: Path) -> None:
    sink = ChangelogSink(spark, changelog_of(f"{tmp_path}/public/t"))
    first = spark.createDataFrame([(1, "a", 10, "c", 0, 0), (2, "b", 11, "c", 0, 1)], ROWS)
    sink.append(first, 1, meta(2, 11))
    assert sorted(r.id for r in sink.rows(0).collect()) == [1, 2]
    assert latest_commit(spark, sink.path)[1] == meta(2, 11)

    second = spark.createDataFrame(
        [(1, "a2", 20, "u", 0, 2, 5)], ROWS + ", added int"
    )  # the table gained a column
    sink.append(second, 2, meta(3, 20))
    assert sorted((r.id, r.v, r.added) for r in sink.rows(0).collect()) == [
        (1, "a", None),
        (1, "a2", 5),
        (2, "b", None),
    ]
    assert [r.v for r in sink.rows(1, 2).collect()] == ["a2"]

    before_drop = latest_commit(spark, sink.path)[0]
    sink.drop_through(1)  # compacted into the base table
    assert [r.v for r in sink.rows(0).collect()] == ["a2"]
    sink.vacuum()  # a reader that pinned a version before the drop can still read it
    pinned = spark.read.format("delta").option("versionAsOf", before_drop).load(sink.path)
    assert pinned.count() == 3
    assert latest_commit(spark, sink.path)[1] == meta(3, 20)  # the delete hides nothing covered
    assert "_cdc_epoch" not in sink.rows(0).columns


def _interval(spark: SparkSession, path: str) -> str | None:
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert detail is not None
    return detail["properties"].get("delta.checkpointInterval")


def test_checkpoints_seldom_also_in_changelogs_made_before(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A changelog is appended every round: Delta's checkpoint every tenth commit stalled one
    round in a few, so changelogs checkpoint every APPENDED_OFTEN commits, old ones too."""
    made = ChangelogSink(spark, changelog_of(f"{tmp_path}/public/new"))
    made.keep_properties()  # nothing there yet: nothing to do, and no table made
    assert not made.exists()
    made.append(spark.createDataFrame([(1, "a", 10, "c", 0, 0)], ROWS), 1, meta(1, 10))
    assert _interval(spark, made.path) == APPENDED_OFTEN["delta.checkpointInterval"]

    old = ChangelogSink(spark, changelog_of(f"{tmp_path}/public/old"))
    rows = spark.createDataFrame([(1, "a", 10, "c", 0, 0)], ROWS).selectExpr("*", "1 _cdc_epoch")
    rows.write.format("delta").partitionBy("_cdc_epoch").save(old.path)  # as releases before
    assert _interval(spark, old.path) is None
    old.keep_properties()
    assert _interval(spark, old.path) == APPENDED_OFTEN["delta.checkpointInterval"]
    assert sorted(r.v for r in old.rows(0).collect()) == ["a"]  # its rows untouched
