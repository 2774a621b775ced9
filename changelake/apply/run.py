"""`changelake run`: snapshot each table from its topic, then stream its changes into Delta: each
batch written into the table's base table by one merge-on-write commit (docs/pipeline.md).

One streaming query per connector, reading all its tables' topics: each batch is split by table
(`connector_batch`), so a round costs one Kafka read and one set of jobs per table with changes,
not a query per table competing for the cores. Each start begins every table at the offsets its
own commits record (a fresh checkpoint), so a table whose schema changed incompatibly stops alone
while the others go on, and a table whose topic appears later (a table added to the connector) is
snapshotted and joins when the stream restarts with it. SIGINT/SIGTERM stop every query once the
batch in flight ends (or after STOP_WAIT_S, cancelling its Spark jobs: safe, as a table's commit
records what it covers).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

from pyspark.sql import SparkSession

from changelake import run_log
from changelake.apply import connector_stream
from changelake.apply.added_columns import AddedColumns
from changelake.apply.background import GRACE_S, Background
from changelake.apply.batch import TableApplier
from changelake.apply.capture_watch import CaptureWatch
from changelake.apply.connector_batch import Member
from changelake.apply.guards import Watch, Watched
from changelake.apply.key_change_guard import KeyChangeGuard
from changelake.apply.pipeline_file import PIPELINE_FILE, TableState, write_state
from changelake.apply.resync import Resyncs
from changelake.apply.run_options import RunOptions
from changelake.apply.run_report import batch_line, report_line, summary_lines
from changelake.apply.run_state import Stream, TableJob, add_discovered, all_ended
from changelake.apply.streaming_failure import cause
from changelake.apply.table_start import prepare_table, starting_offsets
from changelake.capture.resend import Asked
from changelake.capture.seams import SeamRepair
from changelake.changelog.registry import SchemaRegistry, registry
from changelake.exceptions import ChangelakeError, RetryableError
from changelake.search.client import SearchClient
from changelake.search.reindex import ready_index
from changelake.settings import Settings
from changelake.sinks.search import SearchSink
from changelake.tables import TableRef, source_of_table
from changelake.views.config import views_config_path
from changelake.views.table_histories import keep_history

Out = Callable[[str], None]
RESTART_DELAYS_S = (2.0, 5.0, 15.0, 60.0)  # after a failure that is not the table's own fault
DISCOVER_EVERY_S = 15.0  # how often a streaming run re-reads connectors/*.json for new tables
SUMMARY_EVERY_S = 60.0  # how often a streaming run prints where every table stands
STOP_WAIT_S = 60.0  # how long stopping a stream waits for its batch in flight
# The longest a stopping run of one connector takes: its views round gets GRACE_S, its stream
# STOP_WAIT_S, then cancelling and Spark's own stop. A supervisor must wait longer before it
# kills (docker-compose.yml's stop_grace_period).
STOP_WITHIN_S = GRACE_S + STOP_WAIT_S + 30.0
ONCE_ATTEMPTS = 3  # a --once run gives a failing table this many tries, then reports it
Discover = Callable[[], list[TableRef]]


class Pipeline:
    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        refs: list[TableRef],
        options: RunOptions,
        out: Out = run_log.say,
        discover: Discover | None = None,
    ):
        self.spark, self.settings, self.options, self.out = spark, settings, options, out
        self.jobs = {r.name: TableJob(r) for r in refs}
        self.streams: dict[str, Stream] = {}  # by connector
        self.discover, self.stopping = discover, False
        self.next_discovery = self.next_summary = self.next_watch = 0.0
        self.search_client = SearchClient.of(settings, settings.search_retry_s, out)
        self.watch = Watch(settings.kafka_bootstrap)
        self.dsns: dict[tuple[tuple[str, str], ...], str] = {}  # connector settings → DSN
        resyncs = None if options.once else partial(Resyncs, settings, self.jobs, out)
        self.capture = CaptureWatch(settings, out, self.jobs, resyncs)
        self.seams = SeamRepair(settings, out, self._dsn)  # `run --once` repairs before it runs
        self.resends: list[Asked] = []  # asked by this run's batches: `run --once` waits for them
        self.background = Background(
            spark, settings, options, self._refs, out, self.jobs, self.capture.stalled
        )

    # --- one table ---------------------------------------------------------------------------
    def _prepare(self, job: TableJob) -> bool:
        """Make sure the table exists (snapshot it if not); False while its topic is empty."""
        ref = job.ref
        resnapshot = ref.name in self.options.resnapshot
        if resnapshot:  # once per run
            left = tuple(n for n in self.options.resnapshot if n != ref.name)
            self.options = replace(self.options, resnapshot=left)
        snapshotted = prepare_table(
            self.spark,
            self.settings,
            ref,
            resnapshot,
            self._schemas(ref),
            lambda: self._set(job, TableState.SNAPSHOTTING),
            self.out,
        )
        if snapshotted is None:
            self._set(job, TableState.WAITING)
            return False
        job.ref = keep_history(self.spark, job.ref, self.settings.lake, self.out)
        job.snapshotted = job.snapshotted or snapshotted
        return True

    def _schemas(self, ref: TableRef) -> SchemaRegistry:
        """Where the table's lean records find their schemas (one reader per schemas topic)."""
        return registry(
            self.settings.kafka_bootstrap, ref.schemas_topic, self.settings.schema_wait_s
        )

    def _search(self, job: TableJob) -> SearchSink | None:
        ref = job.ref
        if ref.search is None:
            return None
        sink = SearchSink(self.search_client, ref.search, ref.topic, self.out)
        ready_index(self.spark, ref, self.settings.lake, sink, job.snapshotted, self.out)
        job.snapshotted = False
        return sink

    def _member(self, job: TableJob) -> Member:
        ref, kafka = job.ref, self.settings.kafka_bootstrap
        applier = TableApplier(
            self.spark,
            ref,
            self.settings.lake,
            f"changelake/{ref.schema}.{ref.table}",
            self._on_batch,
            self.settings.run_dir,
            kafka,
            self._schemas(ref),
            self._search(job),
            KeyChangeGuard(ref, kafka, self._dsn(ref), self.out),
            AddedColumns(ref, lambda: self._dsn(ref), self.out, kafka, self.resends),
        )
        return Member(applier)

    # --- one connector's stream --------------------------------------------------------------
    def _tick_stream(self, connector: str) -> None:
        """Mark the tables its batches stopped, notice when it ended, and (re)start it when a
        table is ready to join: a restart begins every table where its commits say."""
        stream = self.streams.setdefault(connector, Stream())
        self._settle(stream)
        if stream.query is not None and not stream.query.isActive:
            self._ended(stream)
        ready = [j for j in self.jobs.values() if j.ref.connector == connector]
        if not any(j.state == TableState.READY for j in ready):
            return
        if stream.query is not None:  # a table joins: the others restart with it
            self._stop_stream(stream)
            for job in ready:
                if job.state == TableState.RUNNING:
                    job.state = TableState.READY
        self._start(connector, stream, [j for j in ready if j.state == TableState.READY])

    def _settle(self, stream: Stream) -> None:
        """Tables its batches left behind: stopped by their own problem, or to be retried
        alone after a service failed them (the stream goes on without them meanwhile)."""
        for name, member in stream.members.items():
            job = self.jobs[name]
            if job.state != TableState.RUNNING:
                continue
            if member.error is not None:
                job.error = member.error
                self.out(run_log.error(f"{name}: STOPPED: {job.error}"))
                self._set(job, TableState.STOPPED)
            elif member.retry is not None:
                self._retry([job], member.retry)

    def _stop_stream(self, stream: Stream) -> None:
        """Stop the query between batches (see `connector_batch` for why never inside one)."""
        assert stream.query is not None and stream.batch is not None
        if not connector_stream.stop(stream.query, stream.batch, STOP_WAIT_S):
            self.out(
                run_log.warning(
                    f"{stream.query.name}: batch still running after {STOP_WAIT_S:.0f}s, cancelled"
                )
            )
        stream.query = None

    def _ended(self, stream: Stream) -> None:
        assert stream.query is not None and stream.batch is not None
        exception = stream.query.exception()
        stream.batch.close(wait_s=0)  # ended: its threads go
        failure = None if exception is None else (stream.batch.failure or str(exception))
        if failure is None and not self.options.once:  # only --once ends on its own
            failure = f"{stream.query.name} ended without an error"
        self._settle(stream)  # a table its last batch stopped is not done
        running = [self.jobs[n] for n in stream.members if self.jobs[n].state == TableState.RUNNING]
        stream.query = None
        if failure is None:  # --once: everything there was is applied
            for job in running:
                self._set(job, TableState.DONE)
        else:
            self._retry(running, str(failure))

    def _start(self, connector: str, stream: Stream, jobs: list[TableJob]) -> None:
        members: dict[str, Member] = {}
        offsets: dict[str, dict[str, int]] = {}
        for job in jobs:
            try:
                job.offsets, start = starting_offsets(self.spark, self.settings, job.ref)
                members[job.ref.topic] = self._member(job)
                offsets[job.ref.topic] = start  # only for a topic the stream subscribes to
            except RetryableError as exc:  # OpenSearch away while its index was made ready
                self._retry([job], str(exc))
            except ChangelakeError as exc:  # this table's topic or configuration
                job.error = str(exc)
                self.out(run_log.error(f"{job.ref.name}: STOPPED: {job.error}"))
                self._set(job, TableState.STOPPED)
        if not members:
            return
        stream.query, stream.batch = connector_stream.start(
            self.spark,
            self.settings.kafka_bootstrap,
            self.settings.checkpoints,
            connector,
            members,
            offsets,
            self.options,
        )
        stream.members = {m.applier.table.name: m for m in members.values()}
        for member in members.values():
            job = self.jobs[member.applier.table.name]
            job.error = None
            self._set(job, TableState.RUNNING)

    def _on_batch(self, table: str, stats: dict[str, Any]) -> None:
        job = self.jobs[table]
        job.count(stats)
        if line := batch_line(job, stats):
            self.out(line)

    # --- all tables --------------------------------------------------------------------------
    def _set(self, job: TableJob, state: TableState) -> None:
        job.state = state
        self._write_state()

    def _dsn(self, ref: TableRef) -> str:
        """The table's source database, resolved once per connector (its settings do not change
        while the run lasts; resolving reads the environment and the secrets file)."""
        if ref.source not in self.dsns:
            self.dsns[ref.source] = source_of_table(self.settings, ref).dsn()
        return self.dsns[ref.source]

    def _write_state(self, ended: bool = False) -> None:
        write_state(
            self.settings.run_dir / PIPELINE_FILE,
            self.started_at,
            self.jobs,
            views_config_path(self.settings),
            ended,
            self.capture.stalled(),
        )

    def _tick(self, job: TableJob) -> None:
        """Advance one table to ready (snapshotted if it had no table): at start, when its
        topic gets its first events, or when a retry is due."""
        if job.state in (TableState.PENDING, TableState.WAITING) or (
            job.state == TableState.FAILED and time.monotonic() >= job.retry_at
        ):
            try:
                if self._prepare(job):
                    self._set(job, TableState.READY)
            except RetryableError as exc:  # a service down: try again later
                self._retry([job], str(exc))
            except ChangelakeError as exc:  # this table's configuration or schema
                job.error = str(exc)
                self.out(run_log.error(f"{job.ref.name}: STOPPED: {job.error}"))
                self._set(job, TableState.STOPPED)

    def _retry(self, jobs: list[TableJob], failure: str) -> None:
        """Try the tables again after a delay that grows with their failures: one delay for all
        of them, so a stream's tables come back together."""
        if not jobs:
            return
        failures = max(j.failures for j in jobs)
        delay = RESTART_DELAYS_S[min(failures, len(RESTART_DELAYS_S) - 1)]
        error = cause(failure)
        for job in jobs:
            job.failures += 1
            if self.options.once and job.failures >= ONCE_ATTEMPTS:  # --once must end
                job.error = error
                stopped = f"{job.ref.name}: STOPPED after {job.failures} failed attempts: {error}"
                self.out(run_log.error(stopped))
                self._set(job, TableState.STOPPED)
                continue
            job.retry_at = time.monotonic() + delay
            retrying = f"{job.ref.name}: batch failed ({error}); retrying in {delay:.0f}s"
            self.out(run_log.warning(retrying))
            job.error = None
            self._set(job, TableState.FAILED)

    def _finished(self) -> bool:
        return self.stopping or all_ended(self.jobs.values(), self.options.once)

    def run(self) -> int:
        self.started_at = datetime.now(UTC).isoformat()
        self._write_state()
        if not self.options.once:
            self.background.start()
        try:
            while not self._finished():
                for job in list(self.jobs.values()):
                    if self.stopping:
                        break
                    self._tick(job)
                for connector in sorted({j.ref.connector for j in self.jobs.values()}):
                    if not self.stopping:
                        self._tick_stream(connector)
                if self.capture.tick():
                    self._write_state()
                if self.options.once:
                    connector_stream.await_each(self.streams.values())
                else:
                    self._periodic()
                time.sleep(0.2)
            if self.options.once and not self.stopping:
                self.background.finish(
                    j.ref for j in self.jobs.values() if j.state == TableState.DONE
                )
        finally:  # an error leaves no query running in a session the caller may keep
            self._stop_all()
            self._write_state(ended=True)
        return self._report()

    def _refs(self) -> list[TableRef]:
        return [j.ref for j in list(self.jobs.values())]

    def _periodic(self) -> None:
        now = time.monotonic()
        if self.discover is not None and now >= self.next_discovery:
            self.next_discovery = now + DISCOVER_EVERY_S
            try:
                found = self.discover()
            except ChangelakeError as exc:  # a connector file mid-edit: keep running, say why
                self.out(run_log.warning(f"connector files not re-read: {exc}"))
                found = []
            add_discovered(self.jobs, found, self.out)
        if now >= self.next_watch:
            self.next_watch = now + self.watch.every_s
            self._watch()
        self.seams.tick(self._refs())
        if now >= self.next_summary:
            if self.next_summary:
                for line in summary_lines(self.jobs.values(), self.streams):
                    self.out(line)
            self.next_summary = now + SUMMARY_EVERY_S

    def _watch(self) -> None:
        running = [
            Watched.of(j.ref, self._dsn(j.ref), j.offsets)
            for j in self.jobs.values()
            if j.state == TableState.RUNNING
        ]
        for name, why in self.watch.due_stops(running).items():
            job = self.jobs[name]
            member = self.streams[job.ref.connector].members.get(name)
            if member is not None:  # its stream skips it from the next batch on
                member.error = why
            job.error = why
            self.out(run_log.error(f"{name}: STOPPED: {why}"))
            self._set(job, TableState.STOPPED)

    def _stop_all(self) -> None:
        self.background.stop()
        for stream in self.streams.values():
            if stream.query is not None and stream.query.isActive:
                self._stop_stream(stream)
        for job in self.jobs.values():
            if job.state == TableState.RUNNING:
                self._set(job, TableState.STOPPED_BY_REQUEST)

    def _report(self) -> int:
        for job in self.jobs.values():
            self.out(report_line(job))
        return 1 if any(j.state == TableState.STOPPED for j in self.jobs.values()) else 0
