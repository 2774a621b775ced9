"""Event-time windows over a table's changes, with a watermark: pure DataFrame-in, DataFrame-out,
built from the table's versions (views/history.py), so the result depends on the order of the
changes (their LSNs) alone, never on how they were batched.

Each version adds its row to the windows its event time falls in, at the LSN of the change that
made it, and takes it away again at the LSN that ended it (the key's next change, its delete, a
truncate): an update that moves an order's time or total moves it between windows. The watermark
at an LSN is the newest event time of any version made before it, less the allowed lateness (as
a stream processor advances it past each event it has seen). A change reaching a window whose end
the watermark has passed is late: it does not change the window's figures but is counted in its
`late` figures, so nothing is dropped silently and `events + late_events` (and each sum plus its
late sum) always equals what the table now holds in that window.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from changelake.views.history import CURRENT, VALID_FROM_LSN, VALID_TO_LSN
from changelake.views.window_config import EventTime

START, END, CLOSED = "window_start", "window_end", "closed"


def _seconds(column: str) -> Column:
    return F.col(column).cast("timestamp").cast("double")


def contributions(versions: DataFrame, spec: EventTime) -> DataFrame:
    """Each version's arrival (+1) and departure (-1, when it ended) as (LSN, sign, event time,
    values), and the watermark each one met (`_mark`, epoch seconds; NULL before any event)."""
    values = [F.col(c).alias(f"_v{i}") for i, (_, c) in enumerate(spec.sums)]
    timed = versions.where(F.col(spec.time).isNotNull())
    came = timed.select(
        F.col(VALID_FROM_LSN).alias("_lsn"), F.lit(1).alias("_sign"), F.col(spec.time).alias("_t"),
        *values,
    )  # fmt: skip
    went = timed.where(F.col(VALID_TO_LSN).isNotNull()).select(
        F.col(VALID_TO_LSN).alias("_lsn"), F.lit(-1).alias("_sign"), F.col(spec.time).alias("_t"),
        *values,
    )  # fmt: skip
    moves = came.unionByName(went)
    # The newest event time seen before each LSN: arrivals' times, running, in LSN order; a
    # move at LSN l sees only arrivals before l (one at l is the change itself). One partition:
    # the watermark is a single sequence.
    marks = (
        came.select("_lsn", _seconds("_t").alias("_seen"))
        .groupBy("_lsn")
        .agg(F.max("_seen").alias("_seen"))
    )
    points = moves.select("_lsn").distinct().join(marks, "_lsn", "full")
    before = Window.orderBy("_lsn").rowsBetween(Window.unboundedPreceding, Window.currentRow - 1)
    watermarked = points.select(
        "_lsn", (F.max("_seen").over(before) - F.lit(spec.lateness_s)).alias("_mark")
    )
    return moves.join(watermarked, "_lsn")


def windows(versions: DataFrame, spec: EventTime) -> DataFrame:
    """Per window with any change: its start and end, `events` and each sum (on-time changes),
    `late` (late changes), `late_events` and each late sum, and `closed` (the watermark after
    every change has passed its end)."""
    moved = contributions(versions, spec)
    size, slide = f"{spec.size_s} seconds", f"{spec.slide_s} seconds"
    placed = moved.select("*", F.window("_t", size, slide).alias("_w"))
    late = F.col("_mark").isNotNull() & (_seconds("_w.end") <= F.col("_mark"))
    sums = []
    for i, (name, _) in enumerate(spec.sums):
        signed = F.col(f"_v{i}") * F.col("_sign")
        sums += [
            F.coalesce(F.sum(F.when(~late, signed)), F.lit(0)).alias(name),
            F.coalesce(F.sum(F.when(late, signed)), F.lit(0)).alias(f"late_{name}"),
        ]
    grouped = placed.groupBy(F.col("_w.start").alias(START), F.col("_w.end").alias(END)).agg(
        F.coalesce(F.sum(F.when(~late, F.col("_sign"))), F.lit(0)).alias("events"),
        F.count(F.when(late, True)).alias("late"),
        F.coalesce(F.sum(F.when(late, F.col("_sign"))), F.lit(0)).alias("late_events"),
        *sums,
    )
    ordered = [START, END, "events", *[n for n, _ in spec.sums], "late", "late_events"]
    ordered += [f"late_{n}" for n, _ in spec.sums]
    return _marked(grouped, versions, spec).select(*ordered, _closed(END).alias(CLOSED))


def _marked(rows: DataFrame, versions: DataFrame, spec: EventTime) -> DataFrame:
    """`rows` with `_now`: the watermark after every change (the newest event time less the
    lateness; NULL without events), joined as one row so the view stays a plan, not a job."""
    now = versions.agg((F.max(_seconds(spec.time)) - F.lit(spec.lateness_s)).alias("_now"))
    return rows.crossJoin(F.broadcast(now))


def _closed(end: str) -> Column:
    return F.coalesce(_seconds(end) <= F.col("_now"), F.lit(False))


def sessions(versions: DataFrame, spec: EventTime) -> DataFrame:
    """Per `by` key, its sessions over the table's rows as they are now: events no more than
    `gap` apart; start, end (the last event plus the gap), `events`, each sum, and `closed`
    (the watermark, the newest event time less the lateness, has passed its end)."""
    rows = versions.where(F.col(CURRENT) & F.col(spec.time).isNotNull())
    by: Sequence[str] = spec.by
    order = Window.partitionBy(*by).orderBy(spec.time)
    gap = _seconds(spec.time) - F.lag(_seconds(spec.time)).over(order)
    starts = rows.select("*", F.when(gap <= spec.gap_s, 0).otherwise(1).alias("_new"))
    numbered = starts.select(
        "*", F.sum("_new").over(order.rowsBetween(Window.unboundedPreceding, 0)).alias("_n")
    )
    grouped = numbered.groupBy(*by, "_n").agg(
        F.min(spec.time).alias("session_start"),
        (F.max(spec.time) + F.expr(f"INTERVAL {spec.gap_s} SECONDS")).alias("session_end"),
        F.count("*").alias("events"),
        *[F.sum(c).alias(n) for n, c in spec.sums],
    )
    marked = _marked(grouped.drop("_n"), versions, spec)
    return marked.select(
        *[c for c in marked.columns if c != "_now"], _closed("session_end").alias(CLOSED)
    )
