"""One micro-batch of a connector's stream, split by table: its records are cut into envelopes
and counted once, then each table with records applies its own (`TableApplier`).

A table's own problem (a schema change it cannot take, see `ChangelakeError`) stops that table,
and a service it alone needs failing (OpenSearch, after the search client's retries) has it
retried later: either way it is skipped from then on, its offsets staying where its last commit
put them, while the others go on. Any other failure fails the batch, and so the stream; tables
that committed meanwhile restart after what they committed.

Spark must never stop the query while a batch runs. It interrupts the batch's JVM calls, and
its test of whether the Python error it gets back means "interrupted" is a regex over the whole
Java trace in it, which overflows the stream thread's stack: the thread dies half-stopped and
a query started next in the session runs no batch. So the run closes the batch function first
(`close`: no new batch does anything, the one in flight finishes), and a failing batch hands
Spark one short line, keeping its real exception in `failure` for the run.
"""

from __future__ import annotations

import threading
import time
import traceback
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pyspark import SparkContext
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from changelake.apply.batch import TableApplier
from changelake.apply.batch_stats import BatchStats, record_stats
from changelake.changelog.decode import envelopes
from changelake.exceptions import ChangelakeError, RetryableError

PARALLEL_TABLES = 4  # tables of one batch applied at once
POOL = "stream"  # its Spark scheduler pool, see fairscheduler.xml


@dataclass
class Member:
    """A table in a connector's stream."""

    applier: TableApplier
    error: str | None = None  # its own problem: it applies nothing more in this stream
    retry: str | None = None  # a service failed it: the run retries it alone, later


def _apply_one(
    member: Member, records: DataFrame, batch_id: int, stats: BatchStats
) -> Exception | None:
    """One table's part of a batch; an unexpected failure is returned for the batch to raise."""
    try:
        member.applier.apply_records(records, batch_id, stats)
    except RetryableError as exc:  # a service that may come back: retried alone
        member.retry = str(exc)
    except ChangelakeError as exc:  # the table's own: it alone stops
        member.error = str(exc)
    except Exception as exc:
        return exc
    return None


class BatchFailed(Exception):
    """What Spark gets of a failed batch: the `ConnectorBatch.failure` in one line."""


class ConnectorBatch:
    """The `foreachBatch` function of a connector's stream."""

    def __init__(self, members: dict[str, Member], context: SparkContext):
        self.members = members  # by topic; the run marks a member with an error stopped
        self.failure: str | None = None  # the last failed batch's traceback, in full
        self._running = threading.Lock()
        self._closed = False
        self._context, self._tag = context, f"changelake-batch-{uuid.uuid4().hex[:12]}"
        self._pool = ThreadPoolExecutor(
            PARALLEL_TABLES, thread_name_prefix="changelake-table", initializer=self._in_thread
        )

    def _in_thread(self) -> None:
        """A thread's Spark jobs: tagged (for `cancel`) and in the stream's pool. A Python
        thread's JVM thread inherits neither, and jobs in no pool are queries' (the default)."""
        self._context.addJobTag(self._tag)
        self._context.setLocalProperty("spark.scheduler.pool", POOL)

    def close(self, wait_s: float) -> bool:
        """No batch does anything from now on; wait up to `wait_s` for the one in flight to
        end. True when none runs (the query can be stopped safely). A batch skipped so is read
        again by the next start, which begins where each table's commits say."""
        self._closed = True
        idle = self._running.acquire(timeout=wait_s)
        if idle:
            self._running.release()
        # Not before: the batch in flight hands its tables to the pool (one still running after
        # wait_s fails when it next does, which the stop makes moot).
        self._pool.shutdown(wait=False)
        return idle

    def cancel(self) -> None:
        """Cancel the Spark jobs its tables are running (a batch that outlasts a stop's wait)."""
        self._context.cancelJobsWithTag(self._tag)

    def __call__(self, raw: DataFrame, batch_id: int) -> None:
        with self._running:
            if self._closed:
                return
            try:
                self._apply(raw, batch_id)
            except Exception as exc:
                self.failure = "".join(traceback.format_exception(exc))
                line = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                raise BatchFailed(line) from None

    def _apply(self, raw: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        self._context.setLocalProperty("spark.scheduler.pool", POOL)  # the stream's thread
        env = envelopes(raw).persist()
        try:
            per_topic = record_stats(env)
            counted = time.monotonic() - started
            work = []
            for topic, stats in sorted(per_topic.items()):
                member = self.members.get(topic)
                if member is None or member.error is not None or member.retry is not None:
                    continue
                stats.started, stats.phases["records"] = started, counted
                work.append((member, env.where(F.col("topic") == topic), stats))
            # Tables side by side: one table's driver work (planning its jobs, committing to
            # Delta) overlaps another's tasks.
            failures = list(self._pool.map(lambda w: _apply_one(w[0], w[1], batch_id, w[2]), work))
            for failure in failures:
                if failure is not None:  # after every table ended: none runs past the batch
                    raise failure
        finally:
            env.unpersist()
