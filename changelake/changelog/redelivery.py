"""Changes Debezium sent twice, told apart from changes that merely look alike.

After Connect crashes, Debezium resumes from the last offset Connect stored, which lags what it
had already written to Kafka: the changes in between reach the topic again. A keyed table
absorbs them (the LSN guard), but an event table appends every change, and a key-less table may
hold two identical rows written by one statement, so content cannot tell a redelivery from a
second change. Where Debezium read a change can: the connectors' `StampPosition` transformation
(connect-smt/) stamps each streamed change with its source offset's last commit, LSN and place
among the changes sharing that LSN, which grow with every change and come back unchanged when it
is sent again. So an event table keeps a stamped change only when its position is past every
position before it: earlier in the batch, in topic order, or appended by an earlier batch (the
commit metadata keeps the highest). Unstamped changes (snapshot reads, a connector without the
transformation) are kept as they come.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

POSITION_HEADER = "changelake.position"  # connect-smt's StampPosition.HEADER
POSITION_TEXT = "position_text"  # the header as a record carries it
POSITION = "_cdc_position"  # as a change row carries it: (commit, lsn, n), ordered
Position = tuple[int, int, int]
_FIELDS = ("commit", "lsn", "n")


def position(text: Column) -> Column:
    """The header's `commit/lsn/n` as an orderable struct; NULL on a record without it."""
    parts = F.split(text, "/")
    return F.when(
        text.isNotNull(),
        F.struct(*(parts[i].cast("long").alias(name) for i, name in enumerate(_FIELDS))),
    )


def as_position(value: Any) -> Position | None:
    """A collected position (a Row, or the list commit metadata stores) as a tuple."""
    if value is None:
        return None
    commit, lsn, n = (int(v) for v in value)
    return commit, lsn, n


def highest(*found: Position | None) -> Position | None:
    present: Sequence[Position] = [p for p in found if p is not None]
    return max(present) if present else None


def first_deliveries(rows: DataFrame, after: Position | None, order: Sequence[str]) -> DataFrame:
    """`rows` without the changes delivered before: a stamped change not past every stamped one
    before it (in `order`, the topic's) nor past `after`. Drops the position column."""
    earlier = F.max(POSITION).over(
        Window.orderBy(*order).rowsBetween(Window.unboundedPreceding, -1)
    )
    if after is not None:
        floor = F.struct(
            *(F.lit(v).cast("long").alias(n) for v, n in zip(after, _FIELDS, strict=True))
        )
        earlier = F.greatest(earlier, floor)
    marked = rows.withColumn("_earlier", earlier)  # a window cannot sit in a WHERE
    keep = F.col(POSITION).isNull() | F.col("_earlier").isNull()
    return marked.where(keep | (F.col(POSITION) > F.col("_earlier"))).drop(POSITION, "_earlier")
