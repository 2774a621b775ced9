"""History (SCD type 2): every version of each row, with when it became and stopped being the
row's state. Pure DataFrame-in, DataFrame-out.

What is stored is append-only: each change of the table with its position (LSN, Kafka partition
and offset), made complete (an unchanged-TOAST placeholder takes the value the row had), and
each truncate as a row of its own. Replays are harmless: the view keeps one row per
(key, LSN, op), a change stored twice being one change. The view orders each key's changes by
position: a version is valid from its change until the key's next change (a delete closes it
and is no version) or the next truncate, whichever comes first; the current version is the one
still open. The state at any past LSN is a filter away: `_valid_from_lsn <= L AND
(_valid_to_lsn IS NULL OR _valid_to_lsn > L)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from changelake.changelog.decode import LSN, OFFSET, OP, PARTITION, SOURCE_TS, TOASTED

VALID_FROM_LSN, VALID_FROM = "_valid_from_lsn", "_valid_from"
VALID_TO_LSN, VALID_TO, CURRENT = "_valid_to_lsn", "_valid_to", "_current"
_ORDER = (LSN, PARTITION, OFFSET)


def carried(changes: DataFrame, key: Sequence[str], toastable: Sequence[str]) -> DataFrame:
    """A batch's changes with each unchanged-TOAST placeholder taking the value the key's
    previous change in the batch carried (never across a delete); what no earlier change of
    the batch carries stays in `_toasted`, for the table as of before the batch to fill."""
    if not toastable:
        return changes
    earlier = (
        Window.partitionBy(*key)
        .orderBy(*_ORDER)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow - 1)
    )
    since_delete = F.last(F.when(F.col(OP) == "d", F.struct(*_ORDER)), True).over(earlier)
    windows = [since_delete.alias("_since_delete")]
    for c in toastable:  # in a select of their own: the next one replaces the columns
        hit = F.array_contains(F.col(TOASTED), c)
        carrier = F.struct(F.struct(*_ORDER).alias("at"), F.col(c).alias("value"))
        windows.append(
            F.last(F.when(~hit & (F.col(OP) != "d"), carrier), True)
            .over(earlier)
            .alias(f"_prior_{c}")
        )
    framed = changes.select("*", *windows)
    resolved: dict[str, Column] = {}
    for c in toastable:
        prior, since = F.col(f"_prior_{c}"), F.col("_since_delete")
        resolved[c] = (
            F.array_contains(F.col(TOASTED), c)
            & prior.isNotNull()
            & (since.isNull() | (prior["at"] > since))
        )
    still = F.filter(
        F.col(TOASTED),
        lambda name: (
            ~F.coalesce(*[F.when(name == F.lit(c), resolved[c]) for c in toastable], F.lit(False))
        ),
    )
    return framed.select(
        *[
            F.when(resolved[c], F.col(f"_prior_{c}.value")).otherwise(F.col(c)).alias(c)
            if c in resolved
            else still.alias(c)
            if c == TOASTED
            else F.col(c)
            for c in changes.columns
        ]
    )


def history_view(
    stored: DataFrame, key: Sequence[str], truncates: Sequence[tuple[int, datetime | None]]
) -> DataFrame:
    """The stored history (`stored`) as versions: the table's columns, the op that made the
    version, `_valid_from_lsn`/`_valid_from`, `_valid_to_lsn`/`_valid_to` (NULL: still valid)
    and `_current`. `truncates`: every truncate's (LSN, source time), from the stored rows."""
    rows = new_versions(stored, key, truncates)
    data = [c for c in stored.columns if c not in (*_ORDER, OP, SOURCE_TS, TOASTED)]
    following = Window.partitionBy(*key).orderBy(*_ORDER)
    next_lsn, next_at = F.lead(LSN).over(following), F.lead(SOURCE_TS).over(following)
    cut_lsn: Column = F.lit(None).cast("long")
    cut_at: Column = F.lit(None).cast("timestamp")
    for lsn, at in sorted(truncates, reverse=True):  # the first truncate after the version
        cut_lsn = F.when(F.col(LSN) < F.lit(lsn), F.lit(lsn)).otherwise(cut_lsn)
        cut_at = F.when(F.col(LSN) < F.lit(lsn), F.lit(at).cast("timestamp")).otherwise(cut_at)
    ends = rows.select("*", next_lsn.alias("_next_lsn"), next_at.alias("_next_at"))
    ends = ends.select("*", cut_lsn.alias("_cut_lsn"), cut_at.alias("_cut_at"))
    truncated = F.col("_cut_lsn").isNotNull() & (
        F.col("_next_lsn").isNull() | (F.col("_cut_lsn") < F.col("_next_lsn"))
    )
    to_lsn = F.when(truncated, F.col("_cut_lsn")).otherwise(F.col("_next_lsn"))
    to_at = F.when(truncated, F.col("_cut_at")).otherwise(F.col("_next_at"))
    return ends.where(F.col(OP) != "d").select(
        *data,
        F.col(OP),
        F.col(LSN).alias(VALID_FROM_LSN),
        F.col(SOURCE_TS).alias(VALID_FROM),
        to_lsn.alias(VALID_TO_LSN),
        to_at.alias(VALID_TO),
        to_lsn.isNull().alias(CURRENT),
    )


def new_versions(
    stored: DataFrame, key: Sequence[str], truncates: Sequence[tuple[int, datetime | None]]
) -> DataFrame:
    """The stored changes that make a version: each once (a key has one change at an LSN,
    however often it was stored: a batch replayed after a crash, or Debezium delivering a change
    again at another offset), less re-reads that change nothing; no truncates."""
    rows = stored.where(F.col(OP) != "t").dropDuplicates([*key, LSN, OP])
    data = [c for c in stored.columns if c not in (*_ORDER, OP, SOURCE_TS, TOASTED)]
    return _without_rereads(rows, key, [c for c in data if c not in key], truncates)


def _without_rereads(
    rows: DataFrame,
    key: Sequence[str],
    values: Sequence[str],
    truncates: Sequence[tuple[int, datetime | None]],
) -> DataFrame:
    """`rows` less each read re-sent through the log (an incremental snapshot's `r`: a repair's,
    or the rows asked for after a column was added with a DEFAULT) that equals the key's change
    before it, with no delete or truncate between: it changes nothing, so it is no new version."""
    before = Window.partitionBy(*key).orderBy(*_ORDER)
    previous_op, previous_lsn = F.lag(OP).over(before), F.lag(LSN).over(before)
    same = previous_op.isNotNull() & (previous_op != "d")
    for column in values:
        same &= F.lag(column).over(before).eqNullSafe(F.col(column))
    for lsn, _ in truncates:
        same &= ~((previous_lsn < F.lit(lsn)) & (F.col(LSN) > F.lit(lsn)))
    flagged = rows.withColumn("_reread", (F.col(OP) == "r") & same)
    return flagged.where(~F.col("_reread")).drop("_reread")
