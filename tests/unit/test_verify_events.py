"""verify of an event table: its events since the last truncate replayed as a multiset (two
identical rows are two), compared with the source's rows; with updates, by count, said so."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

from pyspark.sql import SparkSession

from changelake.verify.diff import Differences
from changelake.verify.events import _row, compare
from changelake.verify.sides import Comparable

HOW = Comparable(set(), set())
EVENTS = "what string, amount decimal(9,2), _cdc_op string, _cdc_lsn long, _kafka_offset long"


def source(*rows: tuple[str, Decimal]) -> Counter[str]:
    return Counter(_row({"what": w, "amount": a}, HOW) for w, a in rows)


def check(spark: SparkSession, events: list[tuple[object, ...]], *rows: tuple[str, Decimal]):  # type: ignore[no-untyped-def]
    found = Differences("delta")
    compare(source(*rows), spark.createDataFrame(events, EVENTS), HOW, found)
    return found


def test_events_replay_to_the_source_rows_each_as_often(spark: SparkSession) -> None:
    one, two = Decimal("1.50"), Decimal("2.25")
    events = [
        ("gone", one, "r", 1, 0),
        (None, None, "t", 5, 1),  # a truncate: what came before it is not there any more
        ("login", one, "c", 6, 2),
        ("logout", two, "c", 7, 3),
        ("logout", two, "c", 8, 4),
        ("refund", two, "c", 9, 5),
        ("refund", two, "d", 10, 6),
    ]
    assert check(spark, events, ("login", one), ("logout", two), ("logout", two)).equal
    short = check(spark, events, ("login", one), ("logout", two))
    assert (short.missing, short.extra) == (0, 1)  # one logout too many in the lake
    deleted_twice = [*events, ("refund", two, "d", 11, 7)]
    found = check(spark, deleted_twice, ("login", one), ("logout", two), ("logout", two))
    assert (found.missing, found.extra) == (0, 1)  # a delete of a row that is not there


def test_updates_make_it_a_comparison_of_counts_that_says_so(spark: SparkSession) -> None:
    events = [("a", None, "c", 1, 0), ("b", None, "u", 2, 1), ("c", None, "c", 3, 2)]
    found = check(spark, events, ("b", Decimal(0)), ("c", Decimal(0)))
    assert found.equal and "1 updates since the last truncate" in found.samples[0]
    assert not check(spark, events, ("b", Decimal(0))).equal
