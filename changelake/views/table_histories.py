"""What a table keeps beside its base table, as `run` prepares it: with a view of views.json that
reads it, its stored history (and no longer a changelog: one left from before is deleted)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pyspark.sql import SparkSession

from changelake import lakefs
from changelake.lake.layout import delta_exists, history_of, retired_changelog_of
from changelake.lake.table import read_table
from changelake.sinks.history import HistorySink
from changelake.tables import TableRef
from changelake.views.maintenance import drop_views_reading


def forget_changes(spark: SparkSession, ref: TableRef, lake: str) -> None:
    """Before a table is snapshotted (again): a history would mix the old table's versions with
    the new one's, and an aggregate view joining it would skip the new history's start."""
    lakefs.delete(spark, retired_changelog_of(ref.path(lake)))
    lakefs.delete(spark, history_of(ref.path(lake)))
    drop_views_reading(spark, lake, ref.path(lake))


def retire_changelog(
    spark: SparkSession, ref: TableRef, lake: str, out: Callable[[str], None]
) -> None:
    """Delete the changelog an earlier changelake kept beside the base table (merge-on-read).
    Nothing is lost: the stream resumes where the base table's commits say, so the changes it
    held that no compaction had folded in yet are read from the topic again."""
    path = retired_changelog_of(ref.path(lake))
    if delta_exists(spark, path):
        out(
            f"{ref.name}: deleting its changelog at {path} (no longer kept: each batch now "
            "writes the base table)"
        )
        lakefs.delete(spark, path)


def start_history(
    spark: SparkSession, ref: TableRef, lake: str, out: Callable[[str], None]
) -> None:
    """A table a view reads and no history yet: its rows as they are, each the first
    version it has. Called before the table joins its stream, so no batch comes in between."""
    if not ref.keeps_history:
        return
    path = ref.path(lake)
    history = HistorySink(spark, history_of(path))
    if history.exists():
        return
    history.seed(read_table(spark, path, ref.soft_delete).live())
    out(f"{ref.name}: its history (for views.json) starts from the table's rows as they are")


def keep_history(
    spark: SparkSession, ref: TableRef, lake: str, out: Callable[[str], None]
) -> TableRef:
    """`ref`, keeping its stored history when one exists though views.json reads it no more: a
    run with another views file would leave a gap in it, and a view reading it again later
    (a history, an aggregate resuming from its offsets) would be wrong without a word."""
    if ref.keeps_history or not HistorySink(spark, history_of(ref.path(lake))).exists():
        return ref
    out(
        f"{ref.name}: its history is kept current though views.json reads it no more (a view "
        f"may again); to stop, delete {history_of(ref.path(lake))} while nothing runs"
    )
    return replace(ref, keeps_history=True)
