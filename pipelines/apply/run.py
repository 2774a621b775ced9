"""`changelake run`: snapshot each table from its topic, then stream its changes into Delta: each
batch appended to the table's changelog, sealed epochs compacted into its base table beside
the stream (merge-on-read, see DESIGN.md).

One streaming query per table, each with its own checkpoint: a table whose schema changed
incompatibly stops alone, and a table whose topic appears later (a table added to the connector)
is snapshotted and started while the others run. SIGINT/SIGTERM stop every query; a batch in
flight is abandoned, which is safe because each batch commits idempotently.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession

from pipelines import lakefs
from pipelines.apply.batch import TableApplier
from pipelines.apply.compaction import Compactor
from pipelines.apply.guards import Watch, Watched, topic_hint, topic_problem
from pipelines.apply.key_change_guard import KeyChangeGuard
from pipelines.apply.run_state import RunOptions, TableJob
from pipelines.apply.snapshot import snapshot
from pipelines.apply.streaming_failure import cause
from pipelines.capture.capture_restarts import CaptureRestarts
from pipelines.exceptions import ChangelakeError, RetryableError
from pipelines.read.reindex import ready_index
from pipelines.read.table import covered
from pipelines.search.client import SearchClient
from pipelines.settings import Settings
from pipelines.sinks.changelog import changelog_of
from pipelines.sinks.delta import DeltaSink
from pipelines.sinks.search import SearchSink
from pipelines.spark import kafka_options
from pipelines.stack.postgres import Postgres
from pipelines.tables import TableRef

Out = Callable[[str], None]
RESTART_DELAYS_S = (2.0, 5.0, 15.0, 60.0)  # after a failure that is not the table's own fault
DISCOVER_EVERY_S = 15.0  # how often a streaming run re-reads connectors/*.json for new tables
SUMMARY_EVERY_S = 60.0  # how often a streaming run prints where every table stands
COMPACTION_GRACE_S = 30.0  # how long a stopping run lets a running compaction finish
Discover = Callable[[], list[TableRef]]


ONCE_ATTEMPTS = 3  # a --once run gives a failing table this many tries, then reports it


def lsn_text(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


class Pipeline:
    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        refs: list[TableRef],
        options: RunOptions,
        out: Out = print,
        discover: Discover | None = None,
    ):
        self.spark, self.settings, self.options, self.out = spark, settings, options, out
        self.jobs = {r.name: TableJob(r) for r in refs}
        self.discover = discover
        self.stopping = False
        self.next_discovery = self.next_summary = 0.0
        self.search_client = SearchClient(settings.opensearch_url, settings.search_retry_s, out)
        self.dsn = Postgres(settings).admin_dsn
        self.watch = Watch(settings.kafka_bootstrap, self.dsn)
        self.next_watch = 0.0
        self.capture = CaptureRestarts(settings.connect_url, out)
        self.compactor = Compactor(
            spark, settings.lake, settings.run_dir, options.compact_seconds, out
        )

    # --- one table ---------------------------------------------------------------------------
    def _checkpoint(self, ref: TableRef) -> str:
        return ref.path(self.settings.checkpoints)

    def _prepare(self, job: TableJob) -> bool:
        """Make sure the table exists (snapshot it if not); False while its topic is empty."""
        ref, lake = job.ref, self.settings.lake
        sink = DeltaSink(self.spark, ref.path(lake), ref.name, ref.soft_delete)
        if ref.name in self.options.resnapshot:
            self.out(f"{ref.name}: dropping the derived table and its checkpoint to re-snapshot")
            lakefs.delete(self.spark, ref.path(lake))
            lakefs.delete(self.spark, changelog_of(ref.path(lake)))
            lakefs.delete(self.spark, self._checkpoint(ref))
            self.options = RunOptions(
                **{
                    **self.options.__dict__,
                    "resnapshot": tuple(n for n in self.options.resnapshot if n != ref.name),
                }
            )
        if sink.exists():
            return True
        # A checkpoint or changelog without its table would resume mid-stream: start afresh.
        lakefs.delete(self.spark, self._checkpoint(ref))
        lakefs.delete(self.spark, changelog_of(ref.path(lake)))
        self._set(job, "snapshotting")
        started = time.monotonic()
        result = snapshot(
            self.spark,
            self.settings.kafka_bootstrap,
            ref,
            lake,
            self._app_id(ref),
            self.settings.run_dir,
            check=ref.search.check if ref.search else None,
        )
        if result is None:
            self._set(job, "waiting")
            return False
        took = time.monotonic() - started
        job.snapshotted = True
        self.out(
            f"{ref.name}: snapshot {result.rows:,} rows from {result.records:,} records in "
            f"{took:.1f}s ({result.rows / max(took, 1e-9):,.0f} rows/s), up to LSN "
            f"{lsn_text(result.meta.max_lsn)}"
            + (f"; {result.errors} bad records → _errors" if result.errors else "")
        )
        if result.unresolved_toast:
            self.out(
                f"{ref.name}: warning: {result.unresolved_toast} rows had only Debezium's "
                "unchanged-TOAST placeholder in the topic; those values are NULL. Set REPLICA "
                f"IDENTITY FULL on {ref.schema}.{ref.name} so updates carry them."
            )
        return True

    def _app_id(self, ref: TableRef) -> str:
        ident = lakefs.stable_id(self.spark, f"{self._checkpoint(ref)}/changelake-app-id")
        return f"changelake/{ref.schema}.{ref.name}/{ident}"

    def _starting_offsets(self, job: TableJob) -> str:
        """Where the table's commits say it is; refuses a topic that cannot continue from there."""
        ref = job.ref
        meta = covered(self.spark, ref.path(self.settings.lake))
        job.offsets = {p: int(o) for p, o in (meta.offsets if meta else {}).items()}
        if problem := topic_problem(self.settings.kafka_bootstrap, ref.topic, job.offsets):
            raise ChangelakeError(f"{problem}. {topic_hint(ref.name)}")
        if not job.offsets:
            return "earliest"
        return json.dumps({ref.topic: job.offsets})

    def _search(self, job: TableJob) -> SearchSink | None:
        ref = job.ref
        if ref.search is None:
            return None
        sink = SearchSink(self.search_client, ref.search, ref.topic, self.out)
        ready_index(self.spark, ref, self.settings.lake, sink, job.snapshotted, self.out)
        job.snapshotted = False
        return sink

    def _start(self, job: TableJob) -> None:
        ref = job.ref
        applier = TableApplier(
            self.spark,
            ref,
            self.settings.lake,
            self._app_id(ref),
            self._on_batch,
            self.settings.run_dir,
            self.settings.kafka_bootstrap,
            self._search(job),
            KeyChangeGuard(ref, self.settings.kafka_bootstrap, self.dsn, self.out),
            None if self.options.once else self.compactor,  # --once compacts as it ends
        )
        job.applier = applier

        def apply(batch: Any, batch_id: int) -> None:
            try:
                applier(batch, batch_id)
            except RetryableError:  # a service that may come back (OpenSearch): restart later
                raise
            except ChangelakeError as exc:  # the table's own problem: it stops
                job.error = str(exc)
                raise

        stream = (
            self.spark.readStream.format("kafka")
            .options(**kafka_options(self.spark, self.settings.kafka_bootstrap, ref.topic))
            .option("startingOffsets", self._starting_offsets(job))
            .option("maxOffsetsPerTrigger", str(self.options.max_records_per_batch))
            .option("includeHeaders", "true")  # a key update's records say so in theirs
            .load()
        )
        writer = (
            stream.writeStream.foreachBatch(apply)
            .queryName(f"changelake-{ref.schema}-{ref.name}")
            .option("checkpointLocation", self._checkpoint(ref))
        )
        if self.options.once:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{self.options.trigger_seconds} seconds")
        job.query = writer.start()
        job.error = None
        self._set(job, "running")

    def _on_batch(self, table: str, stats: dict[str, Any]) -> None:
        job = self.jobs[table]
        job.batches += 1
        job.changes += int(stats.get("changes", 0))
        job.errors += int(stats.get("errors", 0))
        job.stats = stats
        for partition, offset in (stats.get("offsets") or {}).items():
            job.offsets[partition] = max(offset, job.offsets.get(partition, 0))
        if stats.get("records"):
            extra = f", {stats['errors']} → _errors" if stats.get("errors") else ""
            if job.ref.search is not None:
                extra += f", {stats.get('indexed', 0):,} indexed"
                extra += f" ({stats['stale']:,} stale)" if stats.get("stale") else ""
            seconds = float(stats["seconds"])
            self.out(
                f"{table}: batch {stats['batch']}: {stats['changes']:,} changes from "
                f"{stats['records']:,} records{extra} in {seconds:.1f}s "
                f"({stats['changes'] / max(seconds, 1e-9):,.0f}/s), "
                f"LSN {lsn_text(int(stats['max_lsn']))} "
                f"[{', '.join(f'{k} {v:.1f}' for k, v in stats.get('phases', {}).items())}]"
            )

    # --- all tables --------------------------------------------------------------------------
    def _set(self, job: TableJob, state: str) -> None:
        job.state = state
        self._write_state()

    def _write_state(self) -> None:
        doc = {
            "pid": os.getpid(),
            "started": self.started_at,
            "tables": {n: {"state": j.state, "error": j.error} for n, j in self.jobs.items()},
        }
        path = self.settings.run_dir / "pipeline.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2))
        tmp.replace(path)

    def _tick(self, job: TableJob) -> None:
        """Advance one table: snapshot or start it when due, notice when its query ends."""
        if job.state in ("pending", "waiting") or (
            job.state == "failed" and time.monotonic() >= job.retry_at
        ):
            try:
                if self._prepare(job):
                    self._start(job)
            except RetryableError as exc:  # a service down: try again later
                self._retry(job, str(exc))
            except ChangelakeError as exc:  # this table's configuration or schema
                job.error = str(exc)
                self.out(f"{job.ref.name}: STOPPED: {job.error}")
                self._set(job, "stopped")
            return
        if job.state != "running" or job.query is None or job.query.isActive:
            return
        failure = job.query.exception()
        if failure is None:
            self._set(job, "done")
        elif job.error is not None:  # the table's own problem (schema): it stays stopped
            self.out(f"{job.ref.name}: STOPPED: {job.error}")
            self._set(job, "stopped")
        else:
            self._retry(job, str(failure))

    def _retry(self, job: TableJob, failure: str) -> None:
        delay = RESTART_DELAYS_S[min(job.failures, len(RESTART_DELAYS_S) - 1)]
        job.failures += 1
        job.error = cause(failure)
        if self.options.once and job.failures >= ONCE_ATTEMPTS:  # --once must end
            self.out(f"{job.ref.name}: STOPPED after {job.failures} failed attempts: {job.error}")
            self._set(job, "stopped")
            return
        job.retry_at = time.monotonic() + delay
        self.out(f"{job.ref.name}: batch failed ({job.error}); retrying in {delay:.0f}s")
        self._set(job, "failed")
        job.error = None

    def _finished(self) -> bool:
        if self.stopping:
            return True
        if not self.options.once:  # streaming: until nothing is left that could still run
            return bool(self.jobs) and all(j.state == "stopped" for j in self.jobs.values())
        return all(j.state in ("done", "stopped", "waiting") for j in self.jobs.values())

    def run(self) -> int:
        self.started_at = datetime.now(UTC).isoformat()
        self._write_state()
        if not self.options.once:
            self.compactor.start()
        try:
            while not self._finished():
                for job in list(self.jobs.values()):
                    if self.stopping:
                        break
                    self._tick(job)
                self.capture.tick(j.ref.connector for j in self.jobs.values())
                if self.options.once:
                    self._await_once()
                else:
                    self._periodic()
                time.sleep(0.2)
            if self.options.once and not self.stopping:
                self._compact_all()
        finally:  # an error leaves no query running in a session the caller may keep
            self._stop_all()
        return self._report()

    def _compact_all(self) -> None:
        """A `--once` run leaves every table it finished compacted: its base table alone is
        current, for readers that know nothing of the changelog."""
        for job in self.jobs.values():
            if job.state == "done" and job.applier is not None:
                sealed = job.applier.seal()
                if sealed is not None:
                    self.compactor.run(sealed)

    def _periodic(self) -> None:
        now = time.monotonic()
        if self.discover is not None and now >= self.next_discovery:
            self.next_discovery = now + DISCOVER_EVERY_S
            try:
                found = self.discover()
            except ChangelakeError as exc:  # a connector file mid-edit: keep running, say why
                self.out(f"connector files not re-read: {exc}")
                found = []
            for ref in found:
                if ref.name not in self.jobs:
                    self.out(
                        f"{ref.name}: added to {ref.connector}; snapshotting it when its "
                        "topic has events"
                    )
                    self.jobs[ref.name] = TableJob(ref)
        if now >= self.next_watch:
            self.next_watch = now + self.watch.every_s
            self._watch()
        if now >= self.next_summary:
            if self.next_summary:
                self._summary()
            self.next_summary = now + SUMMARY_EVERY_S

    def _watch(self) -> None:
        running = [
            Watched(
                name,
                j.ref.schema,
                j.ref.name,
                j.ref.topic,
                j.ref.slot,
                j.ref.database,
                dict(j.offsets),
            )
            for name, j in self.jobs.items()
            if j.state == "running"
        ]
        for name, why in self.watch.due_stops(running).items():
            job = self.jobs[name]
            if job.query is not None and job.query.isActive:
                job.query.stop()
            job.error = why
            self.out(f"{name}: STOPPED: {why}")
            self._set(job, "stopped")

    def _summary(self) -> None:
        for name, job in self.jobs.items():
            behind = "?"
            progress = job.query.lastProgress if job.query is not None else None
            if progress and progress.get("sources"):
                metrics = progress["sources"][0].get("metrics") or {}
                behind = str(metrics.get("maxOffsetsBehindLatest", "?"))
            self.out(
                f"{name}: {job.state}, {job.batches} batches, {job.changes:,} changes, "
                f"{job.errors} errors, {behind} records behind"
            )

    def _await_once(self) -> None:
        from pyspark.errors import StreamingQueryException

        for job in self.jobs.values():
            if job.state == "running" and job.query is not None and job.query.isActive:
                # A failed query raises here; _tick reads query.exception() and decides.
                with contextlib.suppress(StreamingQueryException):
                    job.query.awaitTermination(1)

    def _stop_all(self) -> None:
        self.compactor.stop(wait_s=COMPACTION_GRACE_S)
        for job in self.jobs.values():
            if job.query is not None and job.query.isActive:
                job.query.stop()
                if job.state == "running":
                    self._set(job, "stopped by request")

    def _report(self) -> int:
        for name, job in self.jobs.items():
            note = f" ({job.error})" if job.error and job.state == "stopped" else ""
            if job.state == "waiting":
                note = f" (no events on {job.ref.topic} yet)"
            self.out(
                f"{name}: {job.state}{note}: {job.batches} batches, {job.changes:,} changes, "
                f"{job.errors} errors"
            )
        return 1 if any(j.state == "stopped" for j in self.jobs.values()) else 0
