"""A derived table as every reader sees it: its base table ⊕ its changelog, pinned to one pair of
versions (merge-on-read, docs/pipeline.md).

The changelog's version is pinned first, then the base table's: a compaction folds epochs into
the base table before it deletes them from the changelog, so the pair never misses a change (an
epoch the base already holds is filtered out by the base's compacted epoch) and never counts one
twice. Deleted changelog files stay on disk until a VACUUM, so a pinned version stays readable.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from changelake.changelog.plan import Truncate
from changelake.lake.commits import CommitMeta, latest_commit
from changelake.lake.current_rows import current_rows, newest_changes
from changelake.lake.layout import DELETED, EPOCH, changelog_of, delta_exists
from changelake.spark import kept


def epoch_of(meta: CommitMeta | None) -> int:
    """The newest changelog epoch a base-table commit holds (0: none), or an append's epoch."""
    return int(meta.extra.get("epoch", 0)) if meta is not None else 0


def truncate_of(meta: CommitMeta | None) -> Truncate | None:
    """The newest truncate a commit records (appends carry it forward from batch to batch)."""
    found = meta.extra.get("truncate") if meta is not None else None
    if not found:
        return None
    ts = found.get("source_ts")
    return Truncate(int(found["lsn"]), datetime.fromisoformat(ts) if ts else None)


def newest(base: CommitMeta | None, changelog: CommitMeta | None) -> CommitMeta | None:
    """What the table covers: per partition the further offset, the higher LSN, newest time."""
    if base is None or changelog is None:
        return changelog or base
    later = changelog if epoch_of(changelog) > epoch_of(base) else base
    offsets = dict(base.offsets)
    for partition, offset in changelog.offsets.items():
        offsets[partition] = max(offset, offsets.get(partition, 0))
    times = [t for t in (base.max_source_ts, changelog.max_source_ts) if t]
    return replace(
        later,
        offsets=offsets,
        max_lsn=max(base.max_lsn, changelog.max_lsn),
        max_source_ts=max(times) if times else None,
        key=later.key or base.key or changelog.key,
    )


def _latest(spark: SparkSession, path: str) -> tuple[int, CommitMeta | None] | None:
    """A Delta table's newest version and commit metadata (None: no table there)."""
    return latest_commit(spark, path) if delta_exists(spark, path) else None


def commits(spark: SparkSession, base_path: str) -> tuple[CommitMeta | None, CommitMeta | None]:
    """The newest commit metadata of the base table and of its changelog (None: no such table,
    or no commit that says what it covers)."""
    log = _latest(spark, changelog_of(base_path))
    base = _latest(spark, base_path)
    return (base[1] if base else None), (log[1] if log else None)


def covered(spark: SparkSession, base_path: str) -> CommitMeta | None:
    """What the table's commits cover (offsets, LSN, key), without reading any row."""
    return newest(*commits(spark, base_path))


@dataclass(frozen=True)
class TableRead:
    rows: DataFrame  # every row as of the newest change (soft-deleted ones included, marked)
    meta: CommitMeta | None  # what the table covers: offsets, LSN, key
    base_version: int
    base_meta: CommitMeta | None  # the base table's own newest commit (its compacted epoch)
    pending: DataFrame | None  # the changelog's newest change per key the base lacks (yet)
    soft_delete: bool

    def live(self) -> DataFrame:
        """The rows a reader sees: soft-deleted ones left out."""
        return self.rows.where(~F.col(DELETED)) if self.soft_delete else self.rows


def read_table(
    spark: SparkSession, base_path: str, soft_delete: bool = False, cache: bool = False
) -> TableRead:
    """The table at its newest change. The base table must exist (the snapshot creates it).
    `cache`: the changelog's newest change per key is computed now and kept (small: one
    compaction interval of changes; see `spark.kept`), for a view read many times; `pending`
    is that frame, which the caller releases (`spark.release`) when done with the view."""
    changelog_path = changelog_of(base_path)
    log = _latest(spark, changelog_path)  # pinned first: see the module's docstring
    changelog_meta = log[1] if log else None
    changelog = _pinned(spark, changelog_path, log[0]) if log else None
    base_version, base_meta = latest_commit(spark, base_path)
    base = _pinned(spark, base_path, base_version)
    meta = newest(base_meta, changelog_meta)
    key = meta.key if meta is not None else ()
    pending = epoch_of(changelog_meta) > epoch_of(base_meta)
    if changelog is None or not key or not pending:
        return TableRead(base, meta, base_version, base_meta, None, soft_delete)
    fresh = changelog.where(F.col(EPOCH) > F.lit(epoch_of(base_meta))).drop(EPOCH)
    truncates = [t for t in (truncate_of(base_meta), truncate_of(changelog_meta)) if t]
    truncate = max(truncates, key=lambda t: t.lsn) if truncates else None
    pending_rows = newest_changes(fresh, key)
    if cache:
        pending_rows = kept(pending_rows)
    rows = current_rows(base, fresh, key, truncate, soft_delete, pending_rows)
    return TableRead(rows, meta, base_version, base_meta, pending_rows, soft_delete)


def _pinned(spark: SparkSession, path: str, version: int) -> DataFrame:
    return spark.read.format("delta").option("versionAsOf", version).load(path)
