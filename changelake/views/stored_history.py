"""A table's stored history as readers see it (views/history.py): its versions, its changes
with their key, or its rows at one read point (lake/transactions.py)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from changelake.changelog.decode import LSN, OP, SOURCE_TS, TX
from changelake.lake.layout import delta_exists, history_of
from changelake.lake.table import covered
from changelake.lake.transactions import ReadPoint
from changelake.views.history import (
    CURRENT,
    VALID_FROM,
    VALID_FROM_LSN,
    VALID_TO,
    VALID_TO_LSN,
    history_view,
)


def stored_history(
    spark: SparkSession, base_path: str, at: ReadPoint | None = None
) -> tuple[DataFrame, tuple[str, ...]] | None:
    """The stored changes of the table at `base_path` (those of the transactions `at` takes,
    when given) and its key; None while it has no history (or no key)."""
    path = history_of(base_path)
    meta = covered(spark, base_path) if delta_exists(spark, path) else None
    if meta is None or not meta.key:
        return None
    stored = spark.read.format("delta").load(path)
    return (at.of(stored) if at is not None else stored.drop(TX)), meta.key


def read_history(
    spark: SparkSession, base_path: str, at: ReadPoint | None = None
) -> DataFrame | None:
    """The versions of the table at `base_path`; None while it has no history (or no key)."""
    found = stored_history(spark, base_path, at)
    return versions_of(*found) if found is not None else None


def rows_at(spark: SparkSession, base_path: str, at: ReadPoint) -> DataFrame | None:
    """The table's rows as `at` left them, in its own columns and change columns (LSN, op and
    source time of the change that made each row); None while it has no history."""
    versions = read_history(spark, base_path, at)
    if versions is None:
        return None
    made = (OP, VALID_FROM_LSN, VALID_FROM, VALID_TO_LSN, VALID_TO, CURRENT)
    data = [c for c in versions.columns if c not in made]
    return versions.where(F.col(CURRENT)).select(
        *data, OP, F.col(VALID_FROM_LSN).alias(LSN), F.col(VALID_FROM).alias(SOURCE_TS)
    )


def versions_of(stored: DataFrame, key: tuple[str, ...]) -> DataFrame:
    """A stored history's versions (history_view)."""
    # Few (a truncate empties a table): collected, so the view needs no join to find them.
    truncates = stored.where(F.col(OP) == "t").select(LSN, SOURCE_TS).distinct().collect()
    return history_view(stored, key, [(int(t[0]), t[1]) for t in truncates])
