"""Compaction: a table's sealed changelog epochs folded into its base table by ONE MERGE, then
deleted from the changelog (merge-on-read, see DESIGN.md).

A batch that ends a compaction interval seals its epoch (later batches append to the next one),
so the compactor works on changes no append touches any more, beside the stream rather than in
its way. Every step is safe to repeat after a crash: the MERGE is guarded by LSN and idempotent
by (application id, epoch), and records the epoch it holds in the base table's commit, so
readers skip those epochs from then on; the delete of compacted epochs removes whole partitions
of epochs no append writes to, so it never conflicts with the stream.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from pyspark.sql import SparkSession

from pipelines import jsonfile, run_log
from pipelines.apply import faults
from pipelines.apply.streaming_failure import cause
from pipelines.changelog.decode import OFFSET, PARTITION
from pipelines.changelog.evolution import reconcile
from pipelines.read.table import epoch_of, truncate_of
from pipelines.read.view import newest_changes
from pipelines.sinks.changelog import ChangelogSink, changelog_of
from pipelines.sinks.delta import CommitMeta, DeltaSink
from pipelines.tables import TableRef

Out = Callable[[str], None]
POOL = "compaction"  # its Spark scheduler pool, see fairscheduler.xml
VACUUM_EVERY_S = 3600.0  # how often a running pipeline removes a changelog's dropped files
REST_FACTOR = 3.0  # after a compaction of d seconds the compactor rests 3 d


@dataclass(frozen=True)
class Sealed:
    table: TableRef
    app_id: str
    epoch: int
    meta: CommitMeta  # what the epoch covers: the last append into it


def compact(spark: SparkSession, lake: str, run_dir: Path, sealed: Sealed) -> bool:
    """Fold the epochs up to `sealed.epoch` into the base table and delete them from the
    changelog. False when the base table held them already (a repeat after a crash)."""
    ref = sealed.table
    base = DeltaSink.of(spark, ref, lake)
    log = ChangelogSink(spark, changelog_of(base.path))
    _, base_meta = base.latest()
    merged = epoch_of(base_meta) < sealed.epoch
    if merged:
        key = sealed.meta.key
        changes = newest_changes(log.rows(epoch_of(base_meta), sealed.epoch), key)
        evolution = reconcile(ref.name, base.data_schema(), log.data_schema(), key, key)
        if not evolution.empty:
            base.evolve(evolution)
        truncate = truncate_of(sealed.meta)
        if truncate is not None and base_meta is not None and truncate.lsn <= base_meta.max_lsn:
            truncate = None  # applied by an earlier compaction (or before the snapshot)
        meta = replace(
            sealed.meta, kind="compact", extra={**sealed.meta.extra, "epoch": sealed.epoch}
        )
        base.merge(
            changes.drop(PARTITION, OFFSET),
            key,
            truncate,
            meta,
            f"{sealed.app_id}/compact",
            sealed.epoch,
        )
        faults.pause_if("after-compaction-merge", ref.name, run_dir)
    log.drop_through(sealed.epoch)
    return merged


class Compactor:
    """One background thread that compacts sealed epochs, one table at a time. A table's newer
    seal replaces a request not started yet: it covers every epoch the older one did."""

    def __init__(self, spark: SparkSession, lake: str, run_dir: Path, every_s: float, out: Out):
        # A session of its own (same Spark context and caches): the MERGE's transaction id and
        # commit metadata are session settings, which must not reach the stream's own writes.
        self.spark = spark.newSession()
        self.lake, self.run_dir, self.every_s, self.out = lake, run_dir, every_s, out
        self.waiting: dict[str, Sealed] = {}
        self.sealed_at: dict[str, float] = {}
        self.busy: str | None = None
        self.stopping = False
        self.changed = threading.Condition()
        self.thread = threading.Thread(target=self._loop, name="changelake-compactor", daemon=True)

    def due(self, table: str) -> bool:
        """True when `table` should seal its epoch now: an interval since its last seal (or since
        it started), and no compaction of it waiting or running."""
        now = time.monotonic()
        with self.changed:
            since = self.sealed_at.setdefault(table, now)
            busy = table in self.waiting or self.busy == table
        return not busy and now - since >= self.every_s

    def submit(self, sealed: Sealed) -> None:
        with self.changed:
            self.waiting[sealed.table.name] = sealed
            self.sealed_at[sealed.table.name] = time.monotonic()
            self.changed.notify()

    def start(self) -> None:
        self.thread.start()

    def stop(self, wait_s: float) -> None:
        """No new compaction starts; one running gets `wait_s` to finish (stopping Spark cancels
        it otherwise, which is safe: the next run repeats it)."""
        with self.changed:
            self.stopping = True
            self.changed.notify()
        if self.thread.is_alive():
            self.thread.join(wait_s)

    def run(self, sealed: Sealed) -> None:
        """One compaction now, on the caller's thread (a `--once` run ends with these)."""
        started = time.monotonic()
        name = sealed.table.name
        merged = compact(self.spark, self.lake, self.run_dir, sealed)
        if merged:
            self.out(
                f"{name}: compacted changelog epochs through {sealed.epoch} into the base table "
                f"in {time.monotonic() - started:.1f}s"
            )
        self._vacuum_if_due(sealed.table)

    def _vacuum_if_due(self, table: TableRef) -> None:
        """At most once an interval per table, across runs (a `--once` run every minute included):
        the due times live in the run directory. A table's first interval starts at its first
        compaction."""
        path = self.run_dir / "vacuum-due.json"
        due = json.loads(path.read_text()) if path.exists() else {}
        key = table.path(self.lake)
        if key in due and time.time() < float(due[key]):
            return
        if key in due:
            ChangelogSink(self.spark, changelog_of(key)).vacuum()
        due[key] = time.time() + VACUUM_EVERY_S
        jsonfile.write_atomically(path, due)

    def _loop(self) -> None:
        # Its jobs share the cores with the stream's batches by weight (fairscheduler.xml).
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", POOL)
        while True:
            with self.changed:
                while not self.waiting and not self.stopping:
                    self.changed.wait()
                if self.stopping:
                    return
                name, sealed = next(iter(self.waiting.items()))
                del self.waiting[name]
                self.busy = name
            started = time.monotonic()
            try:
                self.run(sealed)
            except Exception as exc:  # the next seal covers these epochs too
                if not self.stopping:
                    self.out(
                        run_log.warning(
                            f"{name}: compaction failed, retried at the next seal: "
                            f"{cause(str(exc))}"
                        )
                    )
            finally:
                # Compactions back to back would hold a core for good on a small machine (a
                # MERGE into a large base table costs about the same however few changes it
                # folds): resting keeps them to a quarter of the time, and each folds more. Not
                # capped by the interval: a 20 s MERGE resting only 30 s kept the compactor busy
                # 40% of the time, and every round beside it took half as long again (freshness
                # p50 6.9 s against 5.3 s at 1,000 row changes/s; the base tables lag longer).
                rest = REST_FACTOR * (time.monotonic() - started)
                with self.changed:
                    self.busy = None
                    self.changed.wait_for(lambda: self.stopping, rest)
