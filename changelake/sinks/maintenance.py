"""`changelake maintain`: the base tables' upkeep that their writes do not do by themselves.

Each batch appends a file of new row versions and marks the old ones in deletion vectors, so a
base table collects small files and marked rows (slower reads) and files no version needs any
more (disk). OPTIMIZE packs the small files into few, leaving the marked rows out; VACUUM
deletes files older versions alone referenced, once older than the retention.

A retention shorter than the table's `delta.deletedFileRetentionDuration` (Delta's default, a
week) is refused: a reader pinned to an older version (a long query, `reindex`, a lagging
reader outside Spark) would lose its files under it. Both operations are safe beside a running
pipeline: a conflict with a batch's commit is retried, and whichever loses waits its turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import SparkSession

from changelake.exceptions import ConfigError
from changelake.lake.commits import WRITE_CONFLICTS
from changelake.lake.layout import delta_exists, q
from changelake.tables import TableRef

Out = Callable[[str], None]
ATTEMPTS = 3


@dataclass(frozen=True)
class Maintained:
    table: str
    files_before: int
    files_after: int
    vacuumed: int  # files VACUUM deleted


def maintain(
    spark: SparkSession, refs: list[TableRef], lake: str, retain_hours: float, out: Out
) -> list[Maintained]:
    done = []
    for ref in refs:
        path = ref.path(lake)
        if not delta_exists(spark, path):
            out(f"{ref.name}: no Delta table yet, nothing to maintain")
            continue
        floor = _retention_floor_hours(spark, path)
        if retain_hours < floor:
            raise ConfigError(
                f"--retain-hours {retain_hours:g}: below {ref.name}'s deleted-file retention "
                f"({floor:g} h), VACUUM would delete files a reader of an older version may "
                "still need",
                f"use {floor:g} or more (or lower the table's delta.deletedFileRetentionDuration)",
            )
        before = _files(spark, path)
        _retrying(spark, f"OPTIMIZE delta.{q(path)}", ref.name, out)
        vacuum = f"VACUUM delta.{q(path)} RETAIN {retain_hours:g} HOURS"
        vacuumed = spark.sql(f"{vacuum} DRY RUN").count()  # VACUUM itself returns no count
        _retrying(spark, vacuum, ref.name, out)
        after = _files(spark, path)
        out(
            f"{ref.name}: {before:,} files → {after:,} after OPTIMIZE; VACUUM deleted "
            f"{vacuumed:,} files older than {retain_hours:g} h that no version needs"
        )
        done.append(Maintained(ref.name, before, after, vacuumed))
    return done


def _files(spark: SparkSession, path: str) -> int:
    return int(spark.sql(f"DESCRIBE DETAIL delta.{q(path)}").first()["numFiles"])  # type: ignore[index]


def _retention_floor_hours(spark: SparkSession, path: str) -> float:
    """The table's delta.deletedFileRetentionDuration in hours (a week when unset)."""
    props = spark.sql(f"DESCRIBE DETAIL delta.{q(path)}").first()["properties"]  # type: ignore[index]
    return interval_hours(
        (props or {}).get("delta.deletedFileRetentionDuration", "interval 1 week")
    )


_HOURS = {"week": 168.0, "day": 24.0, "hour": 1.0, "minute": 1 / 60, "second": 1 / 3600}


def interval_hours(text: str) -> float:
    """A Delta table property's interval (`interval 7 days`, `interval 36 hours`) in hours."""
    words = text.lower().removeprefix("interval").split()
    if len(words) % 2 or not words:
        raise ConfigError(f"cannot read the interval {text!r}")
    total = 0.0
    for number, unit in zip(words[::2], words[1::2], strict=True):
        if unit.rstrip("s") not in _HOURS:
            raise ConfigError(f"cannot read the interval {text!r}: unit {unit!r}")
        total += float(number) * _HOURS[unit.rstrip("s")]
    return total


def _retrying(spark: SparkSession, statement: str, table: str, out: Out) -> None:
    """Run `statement`; a commit conflict with the running pipeline's batches is tried again."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            spark.sql(statement).collect()
            return
        except WRITE_CONFLICTS:  # delta-spark converts them, as for the sinks' writes
            if attempt == ATTEMPTS:
                raise
            out(f"{table}: a batch committed meanwhile; trying again")
            time.sleep(attempt)
