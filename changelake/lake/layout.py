"""Where a table's parts live and what changelake adds to a table's columns: the base table at
`<lake>/<prefix>/<schema>/<table>`, and the columns that say which change a row holds."""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from changelake.changelog.decode import LSN, OFFSET, OP, PARTITION, SOURCE_TS

DELETED, DELETED_AT = "_cdc_deleted", "_cdc_deleted_at"
META_COLUMNS = (LSN, OP, SOURCE_TS)
SOFT_COLUMNS = (DELETED, DELETED_AT)
EVENT_COLUMNS = (PARTITION, OFFSET)  # an event table's rows say where each change came from
# Table properties of the tables written every batch (stored histories, base tables).
# Delta writes a checkpoint (the table's whole state, as Parquet) inside every tenth commit by
# default: that stalled one round in three or four by 2-5 s, and one merge-on-write into a 1M-row
# base table in ten by 2.4 s. A reader replays at most this many small commit files after the
# newest checkpoint.
APPENDED_OFTEN = {"delta.checkpointInterval": "100"}
# Where changelake once kept each table's changelog beside its base table (merge-on-read):
# <lake>/<prefix>/_changelog/<schema>/<table>. A run deletes one it finds (table_histories.py).
CHANGELOGS = "_changelog"
HISTORIES = "_history"  # a table's stored history (sinks/history.py) beside its base table


def history_of(base_path: str) -> str:
    """The history of the base table at `<dir>/<schema>/<table>`: `<dir>/_history/…`."""
    root, schema, table = base_path.rstrip("/").rsplit("/", 2)
    return f"{root}/{HISTORIES}/{schema}/{table}"


def retired_changelog_of(base_path: str) -> str:
    """The retired changelog of the base table at `<dir>/<schema>/<table>`."""
    root, schema, table = base_path.rstrip("/").rsplit("/", 2)
    return f"{root}/{CHANGELOGS}/{schema}/{table}"


def q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def data_schema(spark: SparkSession, path: str, skip: set[str]) -> T.StructType:
    """A Delta table's columns, without changelake's own (`skip`)."""
    schema = spark.read.format("delta").load(path).schema
    return T.StructType([f for f in schema.fields if f.name not in skip])


def delta_exists(spark: SparkSession, path: str) -> bool:
    if DeltaTable.isDeltaTable(spark, path):
        return True
    # isDeltaTable answers from a log cached per path: if this session first looked while
    # another process had only created the empty _delta_log, it keeps saying no. forPath
    # reads the log afresh (and refreshes the cache).
    try:
        DeltaTable.forPath(spark, path)
    except AnalysisException:
        return False
    return True
