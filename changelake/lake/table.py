"""A table as every reader sees it: its base Delta table, pinned to one version.

Each of the table's batches is one merge-on-write commit into it (sinks/merge_on_write.py), so
the newest version holds every change applied, and any Delta reader sees what changelake's own
reads see.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from changelake.changelog.plan import Truncate
from changelake.lake.commits import CommitMeta, latest_commit
from changelake.lake.layout import DELETED, delta_exists


def truncate_of(meta: CommitMeta | None) -> Truncate | None:
    """The newest truncate a commit records (each batch carries it forward to the next)."""
    found = meta.extra.get("truncate") if meta is not None else None
    if not found:
        return None
    ts = found.get("source_ts")
    return Truncate(int(found["lsn"]), datetime.fromisoformat(ts) if ts else None)


def covered(spark: SparkSession, base_path: str) -> CommitMeta | None:
    """What the table's commits cover (offsets, LSN, key), without reading any row (None: no
    table there, or no commit that says)."""
    return latest_commit(spark, base_path)[1] if delta_exists(spark, base_path) else None


@dataclass(frozen=True)
class TableRead:
    rows: DataFrame  # every row as of the version read (soft-deleted ones included, marked)
    meta: CommitMeta | None  # what the table covers: offsets, LSN, key
    version: int
    soft_delete: bool

    def live(self) -> DataFrame:
        """The rows a reader sees: soft-deleted ones left out."""
        return self.rows.where(~F.col(DELETED)) if self.soft_delete else self.rows


def read_table(spark: SparkSession, base_path: str, soft_delete: bool = False) -> TableRead:
    """The table at its newest version. The table must exist (the snapshot creates it)."""
    version, meta = latest_commit(spark, base_path)
    return TableRead(pinned(spark, base_path, version), meta, version, soft_delete)


def pinned(spark: SparkSession, path: str, version: int) -> DataFrame:
    """The Delta table at `path` as of `version`."""
    return spark.read.format("delta").option("versionAsOf", version).load(path)
