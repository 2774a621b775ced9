"""The compactor: keeps every base table within a freshness target of its source, whether or not
more changes follow.

It works in rounds. A round starts when the oldest change not yet in a base table would
otherwise miss the target (its source commit time + the target, less how long a round takes, as
measured); it seals the epoch of every table with changes pending (between two of the table's
batches: later ones append to the next epoch) and folds each into its base table, one MERGE per
table, several tables at once: a MERGE spends much of its time on the driver (planning, reading
and committing the Delta log), which another table's MERGE uses to run its tasks. So the pace
follows the target and the pending volume: a quiet source gets one round for its last changes
and then none, a busy one as many as the target needs (back to back, if the machine cannot fold
the changes that fast).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pyspark.sql import SparkSession

from changelake import jsonfile, run_log
from changelake.apply.compaction import Sealed, compact
from changelake.apply.streaming_failure import cause
from changelake.lake.layout import changelog_of
from changelake.sinks.changelog import ChangelogSink
from changelake.tables import TableRef

Out = Callable[[str], None]
POOL = "compaction"  # its Spark scheduler pool, see fairscheduler.xml
PARALLEL = 4  # tables compacted at once
TICK_S = 0.5  # how often the compactor looks at the tables' pending changes
MARGIN_S = 1.0  # a round ends this long before its oldest change's target, to spare a reader
FIRST_GUESS_S = 3.0  # a round's length before one was measured
RETRY_S = (5.0, 15.0, 60.0)  # after a failed compaction (its epochs stay in the changelog)
SEAL_WAIT_S = 30.0  # how long a seal waits for the table's batch in flight
# How often a table's compacted epochs are deleted from its changelog. Readers skip them anyway
# (by partition), so this only bounds the changelog's log. Under the bench's load a delete took
# 1-38 s (the log replayed, a checkpoint written), and a round waits for its slowest table: with
# a drop once a minute, 9 of 11 rounds held one (median 49 s; the other two 20 s).
DROP_EVERY_S = 300.0
VACUUM_EVERY_S = 3600.0  # how often a running pipeline removes a changelog's dropped files


class Pending(Protocol):
    """A table whose batches append to its changelog (`TableApplier`): what the compactor asks."""

    table: TableRef

    def pending_since(self) -> float | None:
        """When (time.monotonic) the oldest change not in a sealed epoch was committed at the
        source; None: none. A table not resumed yet answers a time long past."""

    def seal_between_batches(self, wait_s: float) -> Sealed | None:
        """Seal its epoch once no batch of it runs (None: nothing to seal, or a batch still
        running after `wait_s`)."""


def _session_of_its_own(spark: SparkSession) -> SparkSession:
    """A session for one thread's MERGEs (same Spark context and caches): a MERGE's transaction
    id and commit metadata are session settings, which must reach neither the stream's own
    writes nor another table's MERGE running at the same time."""
    session = spark.newSession()
    # The changes a MERGE takes are a deterministic read of sealed epochs, which nothing writes
    # any more: Delta need not copy them aside before its two passes (a job less).
    session.conf.set("spark.databricks.delta.merge.materializeSource", "none")
    return session


def round_start(oldest: float | None, target_s: float, round_s: float) -> float | None:
    """When a round must start so that the change committed at `oldest` (None: nothing pending)
    reaches its base table within `target_s`, if the round takes `round_s`."""
    return None if oldest is None else oldest + target_s - MARGIN_S - round_s


@dataclass
class Failed:
    sealed: Sealed | None  # what it had sealed, if it got so far (a later seal covers it too)
    retry_at: float  # time.monotonic
    failures: int = 1


@dataclass
class Outcome:
    name: str
    sealed: Sealed | None = None
    error: Exception | None = None
    phases: dict[str, float] = field(default_factory=dict)


class Compactor:
    def __init__(self, spark: SparkSession, lake: str, run_dir: Path, target_s: float, out: Out):
        self.spark = _session_of_its_own(spark)
        self.local = threading.local()  # each pool thread's session
        self.vacuum_lock = threading.Lock()
        self.lake, self.run_dir, self.target_s, self.out = lake, run_dir, target_s, out
        self.tables: dict[str, Pending] = {}
        self.round_s = FIRST_GUESS_S  # how long a round takes (smoothed)
        self.failed: dict[str, Failed] = {}
        self.dropped_at: dict[str, float] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="changelake-compactor", daemon=True)
        self.pool: ThreadPoolExecutor | None = None
        self.running = False  # a round

    def register(self, table: Pending) -> None:
        """Keep `table` within the target (a table's new applier, after a restart of its
        stream, replaces the old one)."""
        self.tables[table.table.name] = table

    def start(self) -> None:
        self.pool = ThreadPoolExecutor(
            PARALLEL, thread_name_prefix="changelake-compaction", initializer=self._in_pool
        )
        self.thread.start()

    def stop(self, wait_s: float) -> None:
        """No new round starts; one running gets `wait_s` to finish (stopping Spark cancels it
        otherwise, which is safe: the next run repeats it)."""
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(wait_s)
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)

    def run(self, sealed: Sealed) -> None:
        """One compaction now, on the caller's thread (a `--once` run ends with these)."""
        outcome = Outcome(sealed.table.name, sealed)
        self._compact(sealed, outcome.phases, drop=True)
        self._said(outcome)

    def _in_pool(self) -> None:
        self.local.spark = _session_of_its_own(self.spark)
        # Its jobs share the cores with the stream's batches by weight (fairscheduler.xml).
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", POOL)

    def _compact(self, sealed: Sealed, phases: dict[str, float], drop: bool) -> bool:
        started = time.monotonic()
        spark = getattr(self.local, "spark", self.spark)
        merged = compact(spark, self.lake, self.run_dir, sealed, phases, drop)
        phases["total"] = time.monotonic() - started
        self._vacuum_if_due(spark, sealed.table)
        return merged

    def _said(self, outcome: Outcome) -> None:
        if outcome.sealed is None or "merge" not in outcome.phases:
            return
        steps = ", ".join(f"{k} {v:.1f}" for k, v in outcome.phases.items() if k != "total")
        self.out(
            f"{outcome.name}: compacted changelog epochs through {outcome.sealed.epoch} into "
            f"the base table in {outcome.phases['total']:.1f}s ({steps})"
        )

    def _vacuum_if_due(self, spark: SparkSession, table: TableRef) -> None:
        """At most once an interval per table, across runs (a `--once` run every minute included):
        the due times live in the run directory. A table's first interval starts at its first
        compaction."""
        path = self.run_dir / "vacuum-due.json"
        key = table.path(self.lake)
        with self.vacuum_lock:  # the file is shared by the tables compacted at once
            due = json.loads(path.read_text()) if path.exists() else {}
            if key in due and time.time() < float(due[key]):
                return
            vacuum = key in due
            due[key] = time.time() + VACUUM_EVERY_S
            jsonfile.write_atomically(path, due)
        if vacuum:
            ChangelogSink(spark, changelog_of(key)).vacuum()

    # --- rounds --------------------------------------------------------------------------------
    def members(self, now: float) -> list[Pending]:
        """The tables a round started now would compact: those with changes pending, and those
        whose failed compaction is due for a retry."""
        failed = dict(self.failed)  # one look: verification asks from its own thread
        return [
            t
            for name, t in list(self.tables.items())
            if (name in failed and failed[name].retry_at <= now)
            or (name not in failed and t.pending_since() is not None)
        ]

    def due(self) -> float | None:
        """When the next round must start (time.monotonic; None: nothing pending)."""
        now = time.monotonic()
        members = self.members(now)
        if any(t.table.name in self.failed for t in members):
            return now  # a retry that is due
        times = [t.pending_since() for t in members]
        oldest = min((t for t in times if t is not None), default=None)
        return round_start(oldest, self.target_s, self.round_s)

    def leaves_room(self, seconds: float) -> bool:
        """Whether no round runs now, nor must start within `seconds`: room for other work."""
        if self.running:
            return False
        start = self.due()
        return start is None or start - time.monotonic() > seconds

    def _loop(self) -> None:
        while not self.stopping.is_set():
            try:
                start = self.due()
                if start is None or start > time.monotonic():
                    self.stopping.wait(TICK_S)
                    continue
                self.round()
            except Exception as exc:  # never the end of compaction for the rest of the run
                self.out(run_log.warning(f"compaction round failed: {cause(str(exc))}"))
                self.stopping.wait(RETRY_S[0])

    def round(self) -> None:
        """Seal and compact every table with changes pending, several at once."""
        assert self.pool is not None
        started = time.monotonic()
        tables = self.members(started)
        self.running = True
        try:
            outcomes = list(self.pool.map(self._one, tables))
        finally:
            self.running = False
        if any(o.sealed is not None and "merge" in o.phases for o in outcomes):
            took = time.monotonic() - started
            # Smoothed: a round's length follows the tables' sizes and the changes it folds,
            # which move slowly, but one slow round (a checkpoint, GC) must not skew it.
            self.round_s = 0.5 * self.round_s + 0.5 * took
        for outcome in outcomes:
            self._settle(outcome)

    def _one(self, table: Pending) -> Outcome:
        name = table.table.name
        failed = self.failed.get(name)
        outcome = Outcome(name)
        try:
            outcome.sealed = table.seal_between_batches(SEAL_WAIT_S) or (
                failed.sealed if failed else None
            )
            if outcome.sealed is not None:
                now = time.monotonic()
                drop = now - self.dropped_at.get(name, 0.0) >= DROP_EVERY_S
                self._compact(outcome.sealed, outcome.phases, drop)
                if drop:
                    self.dropped_at[name] = now
        except Exception as exc:
            outcome.error = exc
        return outcome

    def _settle(self, outcome: Outcome) -> None:
        name = outcome.name
        failed = self.failed.pop(name, None)
        if outcome.error is None:
            self._said(outcome)
            return
        if self.stopping.is_set():
            return
        failures = failed.failures + 1 if failed else 1
        delay = RETRY_S[min(failures, len(RETRY_S)) - 1]
        self.failed[name] = Failed(outcome.sealed, time.monotonic() + delay, failures)
        self.out(
            run_log.warning(
                f"{name}: compaction failed, retried in {delay:.0f}s: {cause(str(outcome.error))}"
            )
        )
