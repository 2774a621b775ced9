"""Apply one micro-batch of a table's records: decode, prepare, then write it to the table's sinks.

Called for each table with records in a connector's micro-batch (`connector_batch`); everything
here runs once per table and batch: decode → reconcile the schema → newest change per key, made
complete → each sink in turn (`batch_sinks`): dead letters, the stored history, ONE
MERGE-ON-WRITE COMMIT into the table's base table, which records the offsets it covers (the
stream restarts from those, so a batch is never applied twice), then the table's search index.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from changelake import kafka_io
from changelake.apply import faults
from changelake.apply.added_columns import AddedColumns
from changelake.apply.batch_sinks import (
    AppliedBatch,
    Base,
    BatchSink,
    DeadLetters,
    Events,
    History,
    Index,
    write_through,
)
from changelake.apply.batch_stats import BatchStats, add_change_stats
from changelake.apply.key_change_guard import KeyChangeGuard
from changelake.apply.table_columns import TableColumns
from changelake.changelog.batch import Decoded, decode_batch
from changelake.changelog.decode import LSN, TOASTED, Fetch, Schemas, Version
from changelake.changelog.plan import after_truncate, completed, latest_per_key
from changelake.changelog.redelivery import as_position, highest
from changelake.exceptions import ChangelakeError
from changelake.lake.commits import WRITES, CommitMeta, furthest
from changelake.lake.layout import history_of
from changelake.lake.table import read_table, truncate_of
from changelake.sinks.delta import DeltaSink, ErrorsSink
from changelake.sinks.history import HistorySink
from changelake.sinks.search import SearchSink
from changelake.spark import held, job_group
from changelake.tables import TableRef

ONE_TASK_RECORDS = 20_000  # a table's batch of up to this many records is planned as one task


Progress = Callable[[str, dict[str, Any]], None]


def record_fetcher(bootstrap: str, topic: str) -> Fetch:
    def fetch(partition: int, offset: int) -> kafka_io.RawRecord:
        return kafka_io.fetch_one(bootstrap, topic, partition, offset)

    return fetch


class TableApplier:
    """Keeps one table's base table in step with its topic, one batch at a time."""

    def __init__(
        self,
        spark: SparkSession,
        table: TableRef,
        lake: str,
        app_id: str,
        progress: Progress,
        run_dir: Path,
        bootstrap: str,
        schemas: Schemas,
        search: SearchSink | None = None,
        guard: KeyChangeGuard | None = None,
        added: AddedColumns | None = None,
    ):
        self.table, self.app_id, self.progress, self.run_dir = table, app_id, progress, run_dir
        self.guard = guard
        self.spark = spark
        self.fetch = record_fetcher(bootstrap, table.topic)
        self.schemas = schemas
        self.base = DeltaSink.of(spark, table, lake)
        self.history = (
            HistorySink(spark, history_of(self.base.path)) if table.keeps_history else None
        )
        errors = ErrorsSink(f"{lake.rstrip('/')}/_errors")
        self.columns = TableColumns(spark, table, self.base, self.history, added)
        self.dead_letters = DeadLetters(errors)
        self.sinks: list[BatchSink] = [self.dead_letters]
        if table.events:
            self.sinks.append(Events(self.base))
        else:
            self.sinks += [History(self.history)] if self.history is not None else []
            self.sinks.append(Base(self.base, app_id))
            self.sinks += [Index(search, errors, table.topic)] if search is not None else []
        # Kept across batches, so a batch asks Delta and Kafka only for what is new: the last
        # commit (this applier makes every later one), the schema versions.
        self.previous: CommitMeta | None = None
        self.known: dict[int, Version] = {}
        self.resumed = False  # `previous` read from the commits

    def apply_records(self, env: DataFrame, batch_id: int, stats: BatchStats) -> None:
        """Apply this table's records of a batch (`env`, cut into envelopes), whose offsets and
        counts `stats` holds, and report."""
        # Its Spark jobs in a group of their own (named in Spark's UI), so the line can say how
        # many a table's batch took: each is a round of scheduling on the machine's few cores.
        context = self.spark.sparkContext
        with job_group(context, f"{self.table.name}: batch {batch_id}") as g:
            stats = self.apply(env, stats)
            stats.jobs = len(context.statusTracker().getJobIdsForGroup(g))
        self.progress(
            self.table.name,
            {
                "batch": batch_id,
                "seconds": time.monotonic() - stats.started,
                **{k: v for k, v in stats.__dict__.items() if k not in ("marks", "started")},
            },
        )

    def resume(self) -> None:
        """Where the commits say the table is: what it covers, and its last write number."""
        for sink in self.sinks:
            sink.setup()
        self.previous = self.base.latest()[1] if self.base.exists() else None
        self.resumed = True

    def apply(self, env: DataFrame, stats: BatchStats) -> BatchStats:
        with stats.timed("decode"):
            decoded = decode_batch(
                env,
                self.table.name,
                self.table.placeholder,
                self.fetch,
                self.schemas,
                self.known,
                stats.firsts,
                self.table.events,
            )
            decoded.persist()
        try:
            with stats.timed("decode"):
                add_change_stats(stats, decoded)
            return self._apply(decoded, stats)
        finally:
            decoded.unpersist()

    def _apply(self, decoded: Decoded, stats: BatchStats) -> BatchStats:
        with stats.timed("prepare"):
            if not self.resumed:
                self.resume()
            previous = self.previous
        if self.table.events and previous is not None and previous.key:
            raise ChangelakeError(
                f"{self.table.name}: its topic's cleanup.policy makes it an event table, but "
                f"its Delta table at {self.base.path} is keyed by ({', '.join(previous.key)})",
                "set its topic creation group back to a compacting one, or `changelake run "
                f"--resnapshot {self.table.name}` to make it again as events",
            )
        if decoded.changes is None or not (stats.changes or stats.truncate_lsn is not None):
            with stats.timed("errors"):  # a batch of nothing but bad records
                self.dead_letters.letters(decoded, stats)
            return stats
        if self.table.events:
            self._write(self._events_batch(decoded, previous, stats))
            return stats
        key = decoded.key or (previous.key if previous else ())
        with stats.timed("prepare"):
            self.columns.prepare(decoded, previous, key)
        rows = latest_per_key(
            _by_key(after_truncate(decoded.changes, _wiped_below(stats, previous)), key, stats),
            key,
            decoded.toastable if stats.toasted else (),
        )
        before = self._before(stats)
        with ExitStack() as held_rows:
            with stats.timed("complete"):
                # Held for the batch's several reads; read from the table (`before`), cached
                # rows would be planned again by the write into the base table.
                complete = self._complete(rows, key, before)
                rows = held_rows.enter_context(held(complete, before is not None))
            # Before any sink: the restart after a crash begins at the offsets the commit
            # recorded, so whatever must happen besides the sinks' writes happens first.
            if self.guard is not None and stats.marks:
                with stats.timed("key changes"):
                    stats.resent = self.guard.check(
                        stats.marks, stats.offsets, key, decoded.columns
                    )
            meta = self._meta(stats, previous, key)
            self._write(AppliedBatch(decoded, stats, meta, meta.writes, rows, before))
        return stats

    def _events_batch(
        self, decoded: Decoded, previous: CommitMeta | None, stats: BatchStats
    ) -> AppliedBatch:
        """An event table's batch: every change (a truncate too) appended as it came, in one
        commit that records the offsets it covers and the newest position written."""
        meta = self._meta(stats, previous, ())
        delivered = as_position(previous.extra.get("position")) if previous else None
        newest = highest(delivered, stats.max_position)
        if newest is not None:
            meta.extra["position"] = list(newest)
        return AppliedBatch(decoded, stats, meta, meta.writes, delivered=delivered)

    def _write(self, batch: AppliedBatch) -> None:
        """The batch to each sink in turn; after the commit, the applier moves on."""

        def committed() -> None:
            self.previous = batch.meta

        def pause(point: str) -> None:
            faults.pause_if(point, self.table.name, self.run_dir)

        write_through(self.sinks, batch, committed, pause)

    def _before(self, stats: BatchStats) -> DataFrame | None:
        """The table as of before the batch, when the batch needs it: for placeholders still
        open, and a soft-deleting table's deletes. One read, for the base table's rows and the
        history's alike."""
        soft = self.table.soft_delete
        if not stats.toasted and not (soft and stats.deletes):
            return None
        before = read_table(self.spark, self.base.path, soft).rows
        if stats.truncate_lsn is not None and not soft:  # the batch's truncate wiped those
            before = before.where(F.col(LSN) > F.lit(stats.truncate_lsn))
        return before

    def _complete(
        self, rows: DataFrame, key: tuple[str, ...], before: DataFrame | None
    ) -> DataFrame:
        """Placeholders still open, and a soft-deleting table's deletes, take their values from
        the table as of before the batch (`before`: None when the batch needs neither)."""
        if before is None:
            return rows.drop(TOASTED)
        return completed(rows, before, key, self.table.soft_delete)

    def _meta(
        self, stats: BatchStats, previous: CommitMeta | None, key: tuple[str, ...]
    ) -> CommitMeta:
        offsets = furthest(previous.offsets if previous else {}, stats.offsets)
        max_lsn = max(stats.max_lsn, previous.max_lsn if previous else 0)
        newest_ts = max(
            filter(None, [stats.max_source_ts, previous.max_source_ts if previous else None]),
            default=None,
        )
        truncate = (previous.extra.get("truncate") if previous else None) or None
        if stats.truncate_lsn is not None:  # a truncate's lock orders it after every earlier one
            truncate = {"lsn": stats.truncate_lsn, "source_ts": stats.truncate_ts}
        extra: dict[str, Any] = {WRITES: (previous.writes if previous else 0) + 1}
        if truncate:
            extra["truncate"] = truncate
        return CommitMeta(
            "apply", self.table.topic, offsets, max_lsn, newest_ts, key, stats.changes, extra
        )


def _by_key(changes: DataFrame, key: tuple[str, ...], stats: BatchStats) -> DataFrame:
    """A small batch's changes in one partition by key: its newest change per key is found in
    one task and appended as one file, not one per shuffle partition (four tiny files a batch
    cost the write's tasks, and every later read, more than one task saves)."""
    if stats.records > ONE_TASK_RECORDS or not key:
        return changes
    return changes.repartition(1, *key)


def _wiped_below(stats: BatchStats, previous: CommitMeta | None) -> int | None:
    """The LSN below which a change is wiped out: this batch's truncate or the newest one the
    table has recorded. On a topic of several partitions a change committed before a truncate
    can come in a later batch than the truncate (its partition read further behind); readers
    skip it already, and it must not reach the base table, where it would come back."""
    carried = truncate_of(previous)
    found = [n for n in (stats.truncate_lsn, carried.lsn if carried else None) if n is not None]
    return max(found) if found else None
