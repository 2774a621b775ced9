"""Which changes of an event table's batch Debezium sent before (`changelog.redelivery`)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from changelake.changelog.decode import OFFSET, PARTITION
from changelake.changelog.redelivery import (
    POSITION,
    as_position,
    first_deliveries,
    highest,
    position,
)

SCHEMA = f"what string, {PARTITION} int, {OFFSET} long, text string"


def kept(
    spark: SparkSession,
    records: Sequence[tuple[str, str | None]],
    after: tuple[int, int, int] | None = None,
) -> list[str]:
    rows = (
        spark.createDataFrame(
            [(what, 0, offset, text) for offset, (what, text) in enumerate(records)], SCHEMA
        )
        .withColumn(POSITION, position(F.col("text")))
        .drop("text")
    )
    found = first_deliveries(rows, after, (PARTITION, OFFSET))
    assert POSITION not in found.columns
    return [r["what"] for r in found.orderBy(OFFSET).collect()]


def test_a_change_sent_again_after_a_crash_is_kept_once(spark: SparkSession) -> None:
    records = [
        ("a", "10/100/1"),
        ("b", "10/200/1"),  # a COPY's page: two changes at one LSN, told apart by their count
        ("b", "10/200/2"),
        ("c", "210/300/1"),
        ("b", "10/200/2"),  # Connect resumed from the offset stored at b's first: sent again
        ("c", "210/300/1"),
        ("d", "210/400/1"),
        ("snapshot read", None),  # unstamped: kept as it comes
    ]
    assert kept(spark, records) == ["a", "b", "b", "c", "d", "snapshot read"]


def test_a_change_an_earlier_batch_appended_is_not_appended_again(spark: SparkSession) -> None:
    records = [("c", "210/300/1"), ("d", "210/400/1"), ("e", "410/500/1")]
    assert kept(spark, records, after=(210, 400, 1)) == ["e"]
    assert kept(spark, records, after=(210, 300, 1)) == ["d", "e"]
    # Ordered field by field: a later commit wins over a higher LSN inside an earlier one.
    assert kept(spark, [("f", "500/450/1")], after=(410, 500, 1)) == ["f"]


def test_positions_compare_and_collect_as_tuples() -> None:
    assert as_position(None) is None
    assert as_position([210, 400, 2]) == (210, 400, 2)
    assert highest(None, (1, 9, 9), (2, 0, 1)) == (2, 0, 1)
    assert highest(None, None) is None
