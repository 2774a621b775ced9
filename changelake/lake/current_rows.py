"""A table as of its newest change: the base table ⊕ the changelog rows not yet compacted into it.

Pure DataFrame-in, DataFrame-out (merge-on-read, docs/pipeline.md). The changelog side is
small (the changes of one freshness target at most), so it is broadcast and the base table is
only scanned, never shuffled or windowed: a base row stays unless the changelog holds a newer
change of its key; a changelog row is shown unless the base already holds that key at an equal
or newer LSN (the LSN guard, so a replayed old change never hides a newer row).

The changelog rows this expects are complete: the append resolved unchanged-TOAST placeholders
and, for soft-deleting tables, gave each delete the columns of the row it deletes. A truncate is
not a row: it wipes every row and change with a lower LSN, and the newest one reaches the read
as a `Truncate` (the appends carry it in their commit metadata).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from changelake.changelog.decode import LSN, OFFSET, OP, PARTITION, SOURCE_TS, TOASTED
from changelake.changelog.plan import Truncate, latest_per_key
from changelake.lake.layout import DELETED, DELETED_AT, EPOCH

_CL_LSN = "_view_changelog_lsn"
_WHERE_FROM = (PARTITION, OFFSET, EPOCH, TOASTED)  # changelog columns that are not the table's


def newest_changes(changelog: DataFrame, key: Sequence[str]) -> DataFrame:
    """The newest change per key, by (LSN, partition, offset), as merge planning picks it: a
    replay of a change already in the changelog, or an older one, changes nothing."""
    return latest_per_key(changelog.where(F.col(OP) != "t"), key)


def _aligned(changelog: DataFrame, base: DataFrame) -> DataFrame:
    """The changelog with every base column (a column the changelog has not seen yet: NULL)."""
    have = set(changelog.columns)
    missing = [
        F.lit(None).cast(f.dataType).alias(f.name) for f in base.schema if f.name not in have
    ]
    return changelog.select("*", *missing)


def _widened(base: DataFrame, changelog: DataFrame) -> DataFrame:
    """The base table with the columns the changelog has gained and the types it has widened
    since the last compaction (the compaction brings the base table itself up to them)."""
    wider = {f.name: f.dataType for f in changelog.schema if f.name not in _WHERE_FROM}
    kept = [
        F.col(f.name).cast(wider[f.name]).alias(f.name)
        if f.name in wider and wider[f.name] != f.dataType
        else F.col(f.name)
        for f in base.schema
    ]
    have = set(base.columns)
    added = [F.lit(None).cast(t).alias(n) for n, t in wider.items() if n not in have]
    return base.select(*kept, *added)


def _wiped(lsn: Column, truncate: Truncate | None) -> Column:
    return F.lit(False) if truncate is None else lsn < F.lit(truncate.lsn)


def current_rows(
    base: DataFrame,
    changelog: DataFrame,
    key: Sequence[str],
    truncate: Truncate | None = None,
    soft_delete: bool = False,
    newest: DataFrame | None = None,
) -> DataFrame:
    """Every row of the table as of its newest change, in the base table's columns (and those
    the changelog added): deleted rows left out, or (soft-deleting tables) kept with
    `_cdc_deleted` set. `newest`: `newest_changes(changelog, key)`, when the caller has it (a
    cached one spares every read of the view the changelog's scan and shuffle)."""
    base = _widened(base, changelog)
    columns = base.columns
    changes = _aligned(newest if newest is not None else newest_changes(changelog, key), base)
    changes = F.broadcast(changes)
    probe = changes.select(*key, F.col(LSN).alias(_CL_LSN))

    joined = base.join(probe, list(key), "left")
    base_wins = F.col(_CL_LSN).isNull() | (F.col(_CL_LSN) <= F.col(LSN))
    from_base = joined.where(base_wins)
    stale = joined.where(F.col(_CL_LSN).isNotNull() & base_wins).select(*key)  # base is newer
    from_changelog = changes.join(F.broadcast(stale), list(key), "left_anti")  # few: replays

    if not soft_delete:
        kept_base = from_base.where(~_wiped(F.col(LSN), truncate)).select(*columns)
        live = from_changelog.where((F.col(OP) != "d") & ~_wiped(F.col(LSN), truncate))
        return kept_base.unionByName(live.select(*columns))

    def soft(rows: DataFrame, deleted: Column, deleted_at: Column) -> DataFrame:
        wiped = _wiped(F.col(LSN), truncate) & ~deleted
        return rows.select(
            *[c for c in columns if c not in (DELETED, DELETED_AT)],
            (deleted | wiped).alias(DELETED),
            F.when(wiped, F.lit(truncate.source_ts if truncate else None).cast("timestamp"))
            .otherwise(deleted_at)
            .alias(DELETED_AT),
        ).select(*columns)

    is_delete = F.col(OP) == "d"
    return soft(from_base, F.col(DELETED), F.col(DELETED_AT)).unionByName(
        soft(from_changelog, is_delete, F.when(is_delete, F.col(SOURCE_TS)))
    )
