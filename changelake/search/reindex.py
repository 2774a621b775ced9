"""Build a table's search index from its Delta table, into a fresh generation behind the alias.

The build reads the table pinned (at one version). A pipeline may go
on writing while it runs, through the alias into the old generation; so once the alias has
moved, what was committed meanwhile is replayed into the new one: rows changed since (by LSN)
are indexed again, keys gone since are deleted. External versions make both safe to overlap
with the pipeline's own writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from changelake.changelog.decode import LSN, OP
from changelake.exceptions import ConfigError
from changelake.lake.commits import CommitMeta, version_covering
from changelake.lake.layout import delta_exists
from changelake.lake.table import TableRead, pinned, read_table
from changelake.search.bulk import BulkResult, Rejected
from changelake.sinks.delta import ErrorsSink
from changelake.sinks.search import SearchSink, rejected_frame
from changelake.tables import TableRef


@dataclass(frozen=True)
class ReindexResult:
    index: str
    docs: int
    seconds: float
    caught_up: int  # documents written or deleted for commits made during the build
    lsn: int
    rejected: int  # documents OpenSearch refused, now in `_errors`


def reindex(
    spark: SparkSession, table: TableRef, lake: str, sink: SearchSink, out: Callable[[str], None]
) -> ReindexResult:
    """A fresh generation from the table's newest read, the alias moved to it, and what was
    committed meanwhile replayed into it."""
    first = _read(spark, table, lake)
    meta = first.meta
    if meta is None or not meta.key:
        raise ConfigError(f"{table.name}: the Delta table at {table.path(lake)} records no key")
    rows = first.live()
    out(
        f"{table.name}: building a new index for alias {sink.alias} from Delta version "
        f"{first.version}"
    )
    built = sink.build(rows, rows.schema, meta.key)
    final = _read(spark, table, lake)
    caught = replay_between(rows, final.live(), sink, meta.key)
    rejected = built.rejected + caught.rejected
    _dead_letters(spark, table, lake, built.index, rejected, out)
    newest = final.meta or meta
    sink.record(newest.max_lsn, newest.max_source_ts, newest.writes)
    return ReindexResult(
        built.index, built.docs, built.seconds, caught.written, newest.max_lsn, len(rejected)
    )


def catch_up(
    spark: SparkSession,
    table: TableRef,
    lake: str,
    read: TableRead,
    sink: SearchSink,
    out: Callable[[str], None],
) -> int | None:
    """Bring an index that is behind its table (`read`) up to it: the batches a crash let reach
    the table but not OpenSearch, sent as the difference between the table's version the index
    last caught up with and its newest (time travel: both are on disk until a VACUUM, a week).
    The documents written, or None when that version is not found (then rebuild instead)."""
    meta, applied, done = read.meta, sink.applied_lsn(), sink.applied_writes()
    if meta is None or applied is None:
        return None

    def covered(commit: CommitMeta) -> bool:  # by LSN only for a state an older release wrote
        return commit.writes <= done if done is not None else commit.max_lsn <= applied

    if covered(meta):
        return 0
    path = table.path(lake)
    version = version_covering(spark, path, read.version, covered)
    if version is None:
        return None
    out(
        f"{table.name}: the index is behind its table; sending what changed between "
        f"versions {version} and {read.version}"
    )
    before = TableRead(pinned(spark, path, version), meta, version, read.soft_delete)
    caught = replay_between(before.live(), read.live(), sink, meta.key)
    _dead_letters(spark, table, lake, sink.alias, caught.rejected, out)
    sink.record(meta.max_lsn, meta.max_source_ts, meta.writes)
    return caught.written


def ready_index(
    spark: SparkSession,
    table: TableRef,
    lake: str,
    sink: SearchSink,
    snapshotted: bool,
    out: Callable[[str], None],
) -> None:
    """Make a table's index ready before its stream starts: rebuilt after a snapshot, or when
    missing or built for other fields; caught up when it is behind (a batch reached Delta but
    not OpenSearch)."""
    read = _read(spark, table, lake)
    why = "the table was just snapshotted" if snapshotted else None
    if why is None and read.meta is not None:
        why = sink.stale_because(read.rows.schema, read.meta.key)
    if why is None and catch_up(spark, table, lake, read, sink, out) is None:
        why = "it is behind the table by more versions than are kept to catch up from"
    if why is not None:
        out(f"{table.name}: building its search index, because {why}")
        done = reindex(spark, table, lake, sink, out)
        out(
            f"{table.name}: indexed {done.docs:,} documents into {done.index} in "
            f"{done.seconds:.1f}s ({done.docs / max(done.seconds, 1e-9):,.0f} docs/s)"
        )


def replay_between(
    before: DataFrame, now: DataFrame, sink: SearchSink, key: tuple[str, ...]
) -> BulkResult:
    """Send the index what changed between two reads of a table (pinned, so both stay put)."""
    columns = list(key)
    # By (key, LSN), not by "LSN above the old highest": transactions commit out of LSN order,
    # so a row changed meanwhile can carry a lower LSN than some row already indexed.
    changed = now.join(before.select(*columns, LSN), [*columns, LSN], "left_anti")
    # A key gone meanwhile is deleted at its old LSN + 1: above the indexed document, and never
    # above the real delete, so a re-insert after it still wins.
    gone = (
        before.select(*columns, LSN)
        .join(now.select(*columns), columns, "left_anti")
        .withColumn(LSN, F.col(LSN) + 1)
        .withColumn(OP, F.lit("d"))
    )
    return sink.apply(changed.unionByName(gone, allowMissingColumns=True), key, None)


def _read(spark: SparkSession, table: TableRef, lake: str) -> TableRead:
    path = table.path(lake)
    if not delta_exists(spark, path):
        raise ConfigError(
            f"{table.name}: no Delta table at {path} to index",
            "run `changelake run` first; it snapshots the table and builds its index",
        )
    return read_table(spark, path, table.soft_delete)


def _dead_letters(
    spark: SparkSession,
    table: TableRef,
    lake: str,
    index: str,
    rejected: list[Rejected],
    out: Callable[[str], None],
) -> None:
    if not rejected:
        return
    errors = rejected_frame(spark, table.topic, index, rejected)
    ErrorsSink(f"{lake.rstrip('/')}/_errors").write(errors)
    out(f"{table.name}: {len(rejected)} documents OpenSearch refused → _errors")
