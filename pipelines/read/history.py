"""A table's stored history as readers see it (views/history.py): its versions, or its
changes with their key."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.changelog.decode import LSN, OP, SOURCE_TS
from pipelines.read.table import covered
from pipelines.sinks.delta import delta_exists
from pipelines.sinks.history import history_of
from pipelines.views.history import history_view


def stored_history(spark: SparkSession, base_path: str) -> tuple[DataFrame, tuple[str, ...]] | None:
    """The stored changes of the table at `base_path` and its key; None while it has no
    history (or no key)."""
    path = history_of(base_path)
    meta = covered(spark, base_path) if delta_exists(spark, path) else None
    if meta is None or not meta.key:
        return None
    return spark.read.format("delta").load(path), meta.key


def read_history(spark: SparkSession, base_path: str) -> DataFrame | None:
    """The versions of the table at `base_path`; None while it has no history (or no key)."""
    found = stored_history(spark, base_path)
    return versions_of(*found) if found is not None else None


def versions_of(stored: DataFrame, key: tuple[str, ...]) -> DataFrame:
    """A stored history's versions (history_view)."""
    # Few (a truncate empties a table): collected, so the view needs no join to find them.
    truncates = stored.where(F.col(OP) == "t").select(LSN, SOURCE_TS).distinct().collect()
    return history_view(stored, key, [(int(t[0]), t[1]) for t in truncates])
