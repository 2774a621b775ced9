"""Build a table's search index from its Delta table, into a fresh generation behind the alias.

The build reads one pinned version of the table. A pipeline may go on writing while it runs,
through the alias into the old generation; so once the alias has moved, the versions committed
meanwhile are replayed into the new one: rows changed since (by LSN) are indexed again, keys gone
since are deleted. External versions make both safe to overlap with the pipeline's own writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pipelines.changelog.decode import LSN, OP
from pipelines.exceptions import ConfigError
from pipelines.search.bulk import BulkResult, Rejected
from pipelines.sinks.delta import CommitMeta, DeltaSink, ErrorsSink
from pipelines.sinks.search import SearchSink, rejected_frame
from pipelines.tables import TableRef


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
    """A fresh generation from the newest Delta version, the alias moved to it, and what was
    committed meanwhile replayed into it."""
    delta = _delta(spark, table, lake)
    first, meta = delta.latest()
    if meta is None or not meta.key:
        raise ConfigError(f"{table.name}: the Delta table at {delta.path} records no key")
    rows = delta.live_rows(first)
    out(f"{table.name}: building a new index for alias {sink.alias} from Delta version {first}")
    built = sink.build(rows, rows.schema, meta.key)
    final, caught = replay_since(delta, sink, meta.key, first)
    rejected = built.rejected + caught.rejected
    _dead_letters(spark, table, lake, built.index, rejected, out)
    newest = final or meta
    sink.record(newest.max_lsn, newest.max_source_ts)
    return ReindexResult(
        built.index, built.docs, built.seconds, caught.written, newest.max_lsn, len(rejected)
    )


def catch_up(
    spark: SparkSession, table: TableRef, lake: str, sink: SearchSink, out: Callable[[str], None]
) -> int | None:
    """Bring an index that is behind its Delta table up to it, from the Delta version it last
    reflected (changes a failed batch committed to Delta before OpenSearch took them). The
    documents written, or None when that version cannot be found (then rebuild instead)."""
    delta = _delta(spark, table, lake)
    _, meta = delta.latest()
    applied = sink.applied_lsn()
    if meta is None or applied is None:
        return None
    if applied >= meta.max_lsn:
        return 0
    since = delta.version_at_lsn(applied)
    if since is None:
        return None
    out(f"{table.name}: the index is behind its table; replaying Delta since version {since}")
    final, caught = replay_since(delta, sink, meta.key, since)
    _dead_letters(spark, table, lake, sink.alias, caught.rejected, out)
    newest = final or meta
    sink.record(newest.max_lsn, newest.max_source_ts)
    return caught.written


def replay_since(
    delta: DeltaSink, sink: SearchSink, key: tuple[str, ...], since: int
) -> tuple[CommitMeta | None, BulkResult]:
    """Send the index what changed in the Delta table after version `since`."""
    last, newest = delta.latest()
    if last == since:
        return newest, BulkResult()
    columns = list(key)
    before, now = delta.live_rows(since), delta.live_rows(last)
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
    result = sink.apply(changed.unionByName(gone, allowMissingColumns=True), key, None, None)
    return newest, result


def _delta(spark: SparkSession, table: TableRef, lake: str) -> DeltaSink:
    delta = DeltaSink(spark, table.path(lake), table.name, table.soft_delete)
    if not delta.exists():
        raise ConfigError(
            f"{table.name}: no Delta table at {delta.path} to index",
            "run `changelake run` first; it snapshots the table and builds its index",
        )
    return delta


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
    ErrorsSink(f"{lake.rstrip('/')}/_errors").write(errors, f"changelake/{index}", 0)
    out(f"{table.name}: {len(rejected)} documents OpenSearch refused → _errors")
