"""Bootstrap a Delta table from its compacted topic: newest record per key, one append.

The topic's end offsets are taken first; everything up to them is read in one batch, records a
later truncate wiped out are dropped, the newest change per key kept and deleted keys dropped. The
table is created by a single append whose commit records those end offsets, so the change
stream starts at exactly the next record.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from changelake import kafka_io
from changelake.apply import faults
from changelake.apply.batch import record_fetcher
from changelake.apply.batch_stats import BatchStats, add_change_stats, record_stats
from changelake.changelog.batch import Decoded, decode_batch
from changelake.changelog.decode import OFFSET, OP, PARTITION, TOASTED, Schemas, envelopes
from changelake.changelog.exceptions import SchemaError
from changelake.changelog.plan import after_truncate, latest_per_key
from changelake.changelog.redelivery import POSITION, first_deliveries
from changelake.lake.commits import CommitMeta
from changelake.sinks.delta import DeltaSink, ErrorsSink
from changelake.spark import kafka_options
from changelake.tables import TableRef

RECORDS_PER_TASK = 100_000
MAX_READ_TASKS = 64


@dataclass(frozen=True)
class SnapshotResult:
    rows: int
    records: int
    errors: int
    unresolved_toast: int  # rows whose newest record only had the TOAST placeholder
    meta: CommitMeta


def end_offsets(bootstrap: str, topic: str) -> dict[str, int] | None:
    """High watermarks per partition, or None while the topic has no record yet."""
    if topic not in kafka_io.list_topics(bootstrap, topic):
        return None
    marks = kafka_io.watermarks(bootstrap, topic)
    if not marks or all(high == 0 for _, high in marks.values()):
        return None
    return {str(p): high for p, (_, high) in marks.items()}


def snapshot(
    spark: SparkSession,
    bootstrap: str,
    schemas: Schemas,
    table: TableRef,
    lake: str,
    run_dir: Path,
    check: Callable[[T.StructType], None] | None = None,
) -> SnapshotResult | None:
    """Create the table from its topic; None if the topic has nothing to snapshot yet. `schemas`
    has the lean records' schemas; `check` sees the table's columns before anything is written
    (the search config is checked there)."""
    ends = end_offsets(bootstrap, table.topic)
    if ends is None:
        return None
    options = kafka_options(spark, bootstrap, [table.topic])
    # Reading tasks of ~100k records each: progress moves as they finish, and no task holds a
    # core for minutes.
    tasks = min(MAX_READ_TASKS, sum(ends.values()) // RECORDS_PER_TASK)
    options["minPartitions"] = str(max(int(options["minPartitions"]), tasks))
    raw = (
        spark.read.format("kafka")
        .options(**options)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")  # lean records name their schema in one
        .option("endingOffsets", json.dumps({table.topic: {p: o for p, o in ends.items()}}))
        .load()
    )
    env = envelopes(raw).persist()
    target = _Target(table, lake, ends, run_dir)
    try:
        # Counted first: where each schema version first appears, so decoding needs no job of
        # its own to find the versions (one pass over a 2M-record topic less).
        stats = next(iter(record_stats(env).values()), BatchStats(firsts={}))
        decoded = decode_batch(
            env,
            table.name,
            table.placeholder,
            record_fetcher(bootstrap, table.topic),
            schemas,
            {},
            stats.firsts,
            table.events,
        )
        if decoded.missing:
            # Dead-lettering them would write each key's newest change with a known schema as
            # current, though newer ones exist: a bootstrap stops instead (the table alone).
            raise SchemaError(
                f"snapshot of {table.name}: {decoded.unresolved:,} records cannot be read: "
                f"{decoded.missing[0]}",
                "restore the schemas topic (or point value.converter.schemas.topic at it), "
                f"then `changelake run --resnapshot {table.name}`",
            )
        if decoded.changes is None or not (decoded.key or table.events):
            return None
        if check is not None:
            check(decoded.columns)
        decoded.persist()
        try:
            return _append(add_change_stats(stats, decoded), decoded, target)
        finally:
            decoded.unpersist()
    finally:
        env.unpersist()


def key_clustered(
    changes: DataFrame, key: Sequence[str], toastable: Sequence[str] = ()
) -> DataFrame:
    """The rows a snapshot writes: the newest change per key, deleted keys dropped, in
    partitions (so files) that each hold one range of the key, sorted by it; a reader after a
    key, or a range of keys, skips the other files by their min/max statistics. Partitioned by
    key range before the newest-per-key aggregation, which then needs no shuffle of its own."""
    newest = latest_per_key(changes.repartitionByRange(*key), key, toastable)
    return newest.where(F.col(OP) != "d").sortWithinPartitions(*key)


@dataclass(frozen=True)
class _Target:
    table: TableRef
    lake: str
    ends: dict[str, int]  # the end offsets taken before reading
    run_dir: Path


def _append(stats: BatchStats, decoded: Decoded, target: _Target) -> SnapshotResult:
    table, lake, ends, run_dir = (
        target.table,
        target.lake,
        target.ends,
        target.run_dir,
    )
    assert decoded.changes is not None
    if table.events:  # every change the topic still holds, in its order
        return _append_events(stats, decoded, target)
    rows = key_clustered(
        after_truncate(decoded.changes, stats.truncate_lsn),
        decoded.key,
        decoded.toastable if stats.toasted else (),
    )
    unresolved = 0
    if stats.toasted:
        # Counting what stays unresolved needs the rows twice: cached for that (rare) case only,
        # as caching a table of wide rows costs about as much as writing it.
        rows = rows.persist()
        unresolved = rows.where(F.size(TOASTED) > 0).count()
    try:
        meta = CommitMeta(
            "snapshot",
            table.topic,
            ends,
            stats.max_lsn,
            stats.max_source_ts,
            decoded.key,
            stats.changes,
        )
        sink = DeltaSink.of(rows.sparkSession, table, lake)
        faults.pause_if("before-snapshot-commit", table.name, run_dir)
        sink.create(rows.drop(TOASTED, PARTITION, OFFSET), meta)
    finally:
        rows.unpersist()
    if stats.bad:  # counted in the stats: no extra job
        ErrorsSink(f"{lake.rstrip('/')}/_errors").write(decoded.errors)
    return SnapshotResult(sink.written_rows(), stats.records, stats.bad, unresolved, meta)


def _append_events(stats: BatchStats, decoded: Decoded, target: _Target) -> SnapshotResult:
    """An event table's snapshot: every record its (uncompacted) topic still holds, as events,
    each change Debezium sent twice once (`redelivery`)."""
    assert decoded.changes is not None
    table = target.table
    meta = CommitMeta(
        "snapshot", table.topic, target.ends, stats.max_lsn, stats.max_source_ts, (), stats.changes
    )
    if stats.max_position is not None:  # where the next batch's changes must be past
        meta.extra["position"] = list(stats.max_position)
    sink = DeltaSink.of(decoded.changes.sparkSession, target.table, target.lake)
    faults.pause_if("before-snapshot-commit", target.table.name, target.run_dir)
    rows = decoded.changes.drop(TOASTED)
    once = (
        rows.drop(POSITION)
        if stats.max_position is None  # nothing stamped: nothing to skip
        else first_deliveries(rows, None, (PARTITION, OFFSET))
    )
    sink.append(once.orderBy(PARTITION, OFFSET), meta)
    if stats.bad:
        ErrorsSink(f"{target.lake.rstrip('/')}/_errors").write(decoded.errors)
    return SnapshotResult(sink.written_rows(), stats.records, stats.bad, stats.toasted, meta)
