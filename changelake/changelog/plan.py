"""Change planning: a batch of change rows → the one change per key the base table takes.

Pure DataFrame-in, DataFrame-out. Ordering is per key by (LSN, partition, offset): row locks make
a key's changes reach the WAL in commit order, so the newest LSN is the newest state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from changelake.changelog.decode import LSN, OFFSET, OP, PARTITION, SOURCE_TS, TOASTED, TX

_POSITION = (LSN, OP, SOURCE_TS, PARTITION, OFFSET, TOASTED, TX)


@dataclass(frozen=True)
class Truncate:
    """The newest truncate a table has seen: every row and change before it is wiped. Kept in
    commit metadata, so neither a read nor a write needs a job to find it."""

    lsn: int
    source_ts: datetime | None


def _position() -> Column:
    return F.struct(F.col(LSN), F.col(PARTITION), F.col(OFFSET))


def after_truncate(changes: DataFrame, truncate_lsn: int | None) -> DataFrame:
    """Drop truncate events, and every change a later truncate wiped out. A truncate holds an
    exclusive lock, so every change committed after it has a higher LSN."""
    rows = changes.where(F.col(OP) != "t")
    return rows if truncate_lsn is None else rows.where(F.col(LSN) > F.lit(truncate_lsn))


def latest_per_key(
    changes: DataFrame, key: Sequence[str], toastable: Sequence[str] = ()
) -> DataFrame:
    """The newest change per key. With `toastable` columns, a placeholder in the newest change
    takes the value of the newest earlier change of the same key (after its last delete) that
    carried one; what stays unresolved is left in `_toasted`, for the table as of before the
    batch to fill."""
    others = [c for c in changes.columns if c not in key]
    aggs = [F.max_by(F.struct(*others), _position()).alias("_newest")]
    for col in toastable:
        carried = ~F.array_contains(F.col(TOASTED), col) & (F.col(OP) != "d")
        aggs.append(
            F.max_by(
                F.struct(_position().alias("pos"), F.col(col).alias("value")),
                F.when(carried, _position()),
            ).alias(f"_last_{col}")
        )
    if toastable:
        aggs.append(F.max(F.when(F.col(OP) == "d", _position())).alias("_last_delete"))
    grouped = changes.groupBy(*key).agg(*aggs)
    if not toastable:
        return grouped.select(*key, "_newest.*")
    return _resolve_toast(grouped, key, others, toastable)


def _resolve_toast(
    grouped: DataFrame, key: Sequence[str], others: Sequence[str], toastable: Sequence[str]
) -> DataFrame:
    resolved: dict[str, Column] = {}
    for col in toastable:
        last = F.col(f"_last_{col}")
        usable = (
            F.array_contains(F.col(f"_newest.{TOASTED}"), col)
            & last.isNotNull()
            & (F.col("_last_delete").isNull() | (last["pos"] > F.col("_last_delete")))
        )
        resolved[col] = usable
    columns = [
        F.when(resolved[c], F.col(f"_last_{c}.value")).otherwise(F.col(f"_newest.{c}")).alias(c)
        if c in resolved
        else F.col(f"_newest.{c}").alias(c)
        for c in others
        if c != TOASTED
    ]
    still = F.filter(
        F.col(f"_newest.{TOASTED}"),
        lambda name: (
            ~F.coalesce(*[F.when(name == F.lit(c), resolved[c]) for c in toastable], F.lit(False))
        ),
    )
    return grouped.select(*key, *columns, still.alias(TOASTED))


def completed(
    rows: DataFrame, previous: DataFrame, key: Sequence[str], soft_delete: bool
) -> DataFrame:
    """The newest changes made complete from each key's previous row (`previous`: the table as
    of before them, soft-deleted rows included): an unchanged-TOAST placeholder still open takes
    the previous value and, for a soft-deleting table, a delete takes the columns of the row it
    deletes. Rows needing neither pass as they are; `_toasted` is gone from the result."""
    needs = F.size(F.col(TOASTED)) > 0
    if soft_delete:
        needs |= F.col(OP) == "d"
    data = [c for c in rows.columns if c not in key and c not in _POSITION]
    have = set(previous.columns)
    wanting = rows.where(needs)
    found = previous.join(F.broadcast(wanting.select(*key)), list(key), "left_semi")
    found = found.select(
        *key, F.lit(True).alias("_p_found"), *[F.col(c).alias(f"_p_{c}") for c in data if c in have]
    )
    joined = wanting.join(found, list(key), "left")

    def value(c: str) -> Column:
        wanted = F.array_contains(F.col(TOASTED), c)
        if soft_delete:
            wanted |= F.col(OP) == "d"
        if c not in have:
            return F.col(c)
        kept = F.col(f"_p_{c}").cast(rows.schema[c].dataType)  # in the batch's own type
        return F.when(wanted & F.col("_p_found").isNotNull(), kept).otherwise(F.col(c))

    filled = joined.select(*[value(c).alias(c) if c in data else F.col(c) for c in rows.columns])
    return rows.where(~needs).unionByName(filled).drop(TOASTED)
