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
from pipelines.sinks.delta import DeltaSink, ErrorsSink
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
    delta = DeltaSink(spark, table.path(lake), table.name, table.soft_delete)
    if not delta.exists():
        raise ConfigError(
            f"{table.name}: no Delta table at {delta.path} to index",
            "run `changelake run` first; it snapshots the table and builds its index",
        )
    first, meta = delta.latest()
    if meta is None or not meta.key:
        raise ConfigError(f"{table.name}: the Delta table at {delta.path} records no key")
    rows = delta.live_rows(first)
    out(f"{table.name}: building a new index for alias {sink.alias} from Delta version {first}")
    built = sink.build(rows, rows.schema, meta.key)
    rejected = list(built.rejected)
    last, newest = delta.latest()
    caught_up = 0
    if last != first and newest is not None:
        key = list(meta.key)
        now = delta.live_rows(last)
        # By (key, LSN), not by "LSN above the build's highest": transactions commit out of LSN
        # order, so a row changed meanwhile can carry a lower LSN than some row already built.
        changed = now.join(rows.select(*key, LSN), [*key, LSN], "left_anti")
        # A key gone meanwhile is deleted at its built LSN + 1: above the built document, and
        # never above the real delete, so a re-insert after it still wins.
        gone = (
            rows.select(*key, LSN)
            .join(now.select(*key), key, "left_anti")
            .withColumn(LSN, F.col(LSN) + 1)
            .withColumn(OP, F.lit("d"))
        )
        result = sink.apply(
            changed.unionByName(gone, allowMissingColumns=True), meta.key, None, None
        )
        caught_up = result.written
        rejected += result.rejected
    if rejected:
        errors = rejected_frame(spark, table.topic, built.index, rejected)
        ErrorsSink(f"{lake.rstrip('/')}/_errors").write(errors, f"changelake/{built.index}", 0)
        out(f"{table.name}: {len(rejected)} documents OpenSearch refused → _errors")
    final = newest or meta
    sink.record(final.max_lsn, final.max_source_ts)
    return ReindexResult(
        built.index, built.docs, built.seconds, caught_up, final.max_lsn, len(rejected)
    )
