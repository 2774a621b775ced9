"""Enrichment (a time-dependent stream-table join): every change of a table, joined with the
lookup table's row as it was at that change's LSN. Pure DataFrame-in, DataFrame-out.

Both sides come from stored histories (views/history.py). The lookup side is the lookup table's
versions, each valid from its change's LSN up to the key's next change or truncate; a change at
LSN L takes the version valid at L, so a later update of the lookup row never rewrites the
enrichment of earlier changes. It is a left join: a change whose lookup row did not exist at L
(or is not known: before the history started) has NULL lookup columns.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from changelake.changelog.decode import LSN, OFFSET, OP, PARTITION, SOURCE_TS
from changelake.views.history import VALID_FROM_LSN, VALID_TO_LSN

_ORDER = (LSN, PARTITION, OFFSET)
LOOKUP_LSN = "_lookup_lsn"  # the LSN of the lookup row's version a change was joined with


def changes(stored: DataFrame, key: Sequence[str]) -> DataFrame:
    """A table's stored history as its changes, one row per (key, LSN, op), in the table's
    columns plus `_cdc_op`, `_cdc_lsn` and `_cdc_source_ts`. A delete carries the row as it was
    before it: its event holds the key alone unless the table's replica identity is FULL."""
    rows = stored.where(F.col(OP) != "t").dropDuplicates([*key, LSN, OP])
    data = [c for c in stored.columns if c not in (*_ORDER, OP, SOURCE_TS)]
    earlier = (
        Window.partitionBy(*key)
        .orderBy(*_ORDER)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow - 1)
    )
    # A truncate between the row's last version and its delete cannot be: a truncated row is
    # gone, so only a new insert could be deleted after it.
    prior = F.last(F.when(F.col(OP) != "d", F.struct(*data)), True).over(earlier)
    framed = rows.select("*", prior.alias("_prior"))
    deleted = (F.col(OP) == "d") & F.col("_prior").isNotNull()

    def value(c: str) -> Column:
        return F.col(c) if c in key else F.when(deleted, F.col(f"_prior.{c}")).otherwise(F.col(c))

    return framed.select(*[value(c).alias(c) for c in data], OP, LSN, SOURCE_TS)


def enriched(
    stream: DataFrame,
    lookup: DataFrame,
    on: Sequence[tuple[str, str]],
    columns: Sequence[tuple[str, str]],
) -> DataFrame:
    """Each change of `stream` (`changes`) with the `lookup` version (history_view) valid at its
    LSN: `on` pairs a stream column with a lookup key column, `columns` names a lookup column
    under the view's name for it; `_lookup_lsn` is the LSN of the change that made the version
    (NULL: none was valid)."""
    side = lookup.select(
        *[F.col(theirs).alias(f"_on{i}") for i, (_, theirs) in enumerate(on)],
        *[F.col(theirs).alias(f"_col{i}") for i, (_, theirs) in enumerate(columns)],
        F.col(VALID_FROM_LSN).alias("_from"),
        F.col(VALID_TO_LSN).alias("_to"),
    )
    condition = F.lit(True)
    for i, (ours, _) in enumerate(on):
        condition &= stream[ours] == side[f"_on{i}"]
    condition &= (side["_from"] <= stream[LSN]) & (
        side["_to"].isNull() | (side["_to"] > stream[LSN])
    )
    joined = stream.join(side, condition, "left")
    return joined.select(
        *[stream[c] for c in stream.columns if c not in (OP, LSN, SOURCE_TS)],
        *[F.col(f"_col{i}").alias(name) for i, (name, _) in enumerate(columns)],
        F.col("_from").alias(LOOKUP_LSN),
        stream[OP],
        stream[LSN],
        stream[SOURCE_TS],
    )
