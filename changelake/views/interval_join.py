"""A stream-stream interval join over one table's changes: per key, the change that makes the
first condition true (an order placed) paired with the first later change that makes the
second true (the order shipped) within a bound of event time. Pure DataFrame-in, DataFrame-out,
from the table's versions (views/history.py), so the result depends on the order of the changes
alone.

A pair is `matched` (with the seconds between); one whose second event has not come is
`expired` once the watermark (the newest event time seen, less the lateness) has passed the
first event's time plus the bound, and `open` until then: a stream processor would emit it as
unmatched at that moment. A match whose second change arrived only after the watermark had
passed that deadline is marked `late` (a stream processor would have emitted it as expired and
dropped the match): shown, never dropped silently.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from changelake.views.history import VALID_FROM_LSN
from changelake.views.interval_config import IntervalJoin

MATCHED, EXPIRED, OPEN = "matched", "expired", "open"


def _epoch(column: str | Column) -> Column:
    return (F.col(column) if isinstance(column, str) else column).cast("timestamp").cast("double")


def interval_join(versions: DataFrame, key: Sequence[str], spec: IntervalJoin) -> DataFrame:
    """Per key with a first event: `first_at`, `second_at`, `seconds` between them, `state`
    (matched, expired or open) and `late`."""
    lsn = F.col(VALID_FROM_LSN)
    first = versions.where(F.expr(spec.first.when) & F.col(spec.first.time).isNotNull())
    first = first.groupBy(*key).agg(
        F.min_by(F.struct(lsn.alias("lsn"), F.col(spec.first.time).alias("at")), lsn).alias("_f")
    )
    second = versions.where(F.expr(spec.second.when) & F.col(spec.second.time).isNotNull())
    second = second.select(
        *[F.col(k).alias(f"_k_{k}") for k in key],
        lsn.alias("_s_lsn"),
        F.col(spec.second.time).alias("_s_at"),
    )
    deadline = F.col("_f.at") + F.expr(f"INTERVAL {spec.within_s} SECONDS")
    condition = (F.col("_s_lsn") > F.col("_f.lsn")) & F.col("_s_at").between(
        F.col("_f.at"), deadline
    )
    for k in key:
        condition &= F.col(k) == F.col(f"_k_{k}")
    paired = (
        first.join(second, condition, "left")
        .groupBy(*key, "_f")
        .agg(
            F.min_by(
                F.struct(F.col("_s_lsn").alias("lsn"), F.col("_s_at").alias("at")), "_s_lsn"
            ).alias("_s")
        )
    )
    marks = _marks(versions, spec)
    with_mark = paired.join(marks, F.col("_s.lsn") == F.col("_lsn"), "left")
    seen = F.greatest(_epoch(spec.first.time), _epoch(spec.second.time))
    now = versions.agg((F.max(seen) - F.lit(spec.lateness_s)).alias("_now"))
    with_mark = with_mark.crossJoin(F.broadcast(now))  # one row: the view stays a plan
    matched = F.col("_s").isNotNull()
    passed = F.coalesce(_epoch(deadline) <= F.col("_now"), F.lit(False))
    state = F.when(matched, MATCHED).when(passed, EXPIRED).otherwise(OPEN)
    late = matched & F.col("_mark").isNotNull() & (_epoch(deadline) <= F.col("_mark"))
    return with_mark.select(
        *key,
        F.col("_f.at").alias("first_at"),
        F.col("_s.at").alias("second_at"),
        (_epoch("_s.at") - _epoch("_f.at")).alias("seconds"),
        state.alias("state"),
        late.alias("late"),
    )


def _marks(versions: DataFrame, spec: IntervalJoin) -> DataFrame:
    """The watermark (epoch seconds) each version's change met: the newest event time of the
    changes before it, less the lateness."""
    seen = F.greatest(_epoch(spec.first.time), _epoch(spec.second.time))
    points = versions.groupBy(F.col(VALID_FROM_LSN).alias("_lsn")).agg(F.max(seen).alias("_t"))
    before = Window.orderBy("_lsn").rowsBetween(Window.unboundedPreceding, Window.currentRow - 1)
    return points.select("_lsn", (F.max("_t").over(before) - F.lit(spec.lateness_s)).alias("_mark"))
