"""Where a table's batch goes: each of its sinks, in order, through one interface.

A keyed table's batch goes to its dead letters, its stored history (if it keeps one), its base
table (THE commit: one merge-on-write that records the offsets the batch covers, and the stream
restarts from those) and then its search index (if it has one); an event table's, to its dead
letters and its base table (an append, its commit). Whatever a sink before the commit writes is
harmless to write again (the restart after a crash replays the batch); the index, after it, is
caught up from the table's versions when a crash came in between (`reindex.catch_up`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from pyspark.sql import DataFrame

from changelake.apply.batch_stats import BatchStats
from changelake.changelog.batch import Decoded
from changelake.changelog.decode import OFFSET, PARTITION, TOASTED
from changelake.changelog.plan import completed
from changelake.changelog.redelivery import POSITION, Position, first_deliveries
from changelake.exceptions import RetryableError
from changelake.lake.commits import CommitMeta
from changelake.lake.table import truncate_of
from changelake.sinks.delta import DeltaSink, ErrorsSink
from changelake.sinks.history import HistorySink
from changelake.sinks.search import SearchSink, rejected_frame
from changelake.views.history import carried


@dataclass
class AppliedBatch:
    """One table's batch as every sink takes it."""

    decoded: Decoded
    stats: BatchStats  # counts, and where the time went; sinks add what they wrote
    meta: CommitMeta  # what the commit records: offsets covered, highest LSN, the key
    version: int  # the table's write number: the commit's transaction version (see `Base`)
    rows: DataFrame | None = None  # newest change per key, complete (a keyed table's)
    before: DataFrame | None = None  # the table before the batch, when the batch needs it
    delivered: Position | None = None  # an event table's: the newest position already written

    @property
    def key(self) -> tuple[str, ...]:
        return self.meta.key


class BatchSink(Protocol):
    """A place a table's batches are written to."""

    step: str  # what its time is counted under in the batch's line; `before-<step>` fault point
    commits: bool  # its write is the batch's commit

    def setup(self) -> None:
        """Once, before the table's first batch of a run."""

    def write(self, batch: AppliedBatch) -> None:
        """The batch, in one write; safe to repeat if before the commit."""


def write_through(
    sinks: Sequence[BatchSink],
    batch: AppliedBatch,
    committed: Callable[[], None],
    pause: Callable[[str], None] = lambda _: None,
) -> None:
    """The batch to each sink in turn, its time counted under the sink's step; `committed`
    right after the commit, before any sink after it; `pause(point)` at each fault point
    (`before-<step>`, `after-commit`). A sink that fails ends the batch there."""
    for sink in sinks:
        pause(f"before-{sink.step}")
        with batch.stats.timed(sink.step):
            sink.write(batch)
        if sink.commits:
            committed()
            pause("after-commit")


class DeadLetters:
    """Records that cannot be applied, to `_errors` (once each, however often written)."""

    step, commits = "errors", False

    def __init__(self, errors: ErrorsSink) -> None:
        self.errors = errors

    def setup(self) -> None:
        pass

    def write(self, batch: AppliedBatch) -> None:
        self.letters(batch.decoded, batch.stats)

    def letters(self, decoded: Decoded, stats: BatchStats) -> None:
        """A batch's dead letters (a batch of nothing but bad records has only those)."""
        if stats.bad:  # counted in the batch's aggregations: no job when there are none
            self.errors.write(decoded.errors)
        stats.errors += stats.bad


class History:
    """Every change of the batch, made complete: an unchanged-TOAST value from the key's
    previous change in the batch, or else from the table before it."""

    step, commits = "history", False

    def __init__(self, history: HistorySink) -> None:
        self.history = history

    def setup(self) -> None:
        self.history.keep_properties()

    def write(self, batch: AppliedBatch) -> None:
        changes = batch.decoded.with_transactions  # a read at one commit LSN needs them
        assert changes is not None
        toasted = batch.stats.toasted
        rows = carried(changes, batch.key, batch.decoded.toastable if toasted else ())
        if not toasted or batch.before is None:
            rows = rows.drop(TOASTED)
        else:
            rows = completed(rows, batch.before, batch.key, False)
        self.history.append(rows)


class Base:
    """The batch's newest change per key (and its truncate) into the base table, in one
    merge-on-write commit: the commit. Its transaction is named (the run's application id, the
    table's write number): a write number another writer took meanwhile (a second run on the
    same lake, whose batches began elsewhere) is refused, and the table starts again from what
    its commits say, so neither run's changes are lost."""

    step, commits = "write", True

    def __init__(self, base: DeltaSink, app_id: str) -> None:
        self.base, self.app_id = base, app_id

    def setup(self) -> None:
        pass

    def write(self, batch: AppliedBatch) -> None:
        assert batch.rows is not None
        truncate = truncate_of(batch.meta) if batch.stats.truncate_lsn is not None else None
        rows = batch.rows.drop(PARTITION, OFFSET)
        key, meta = batch.key, batch.meta
        if not self.base.write_changes(rows, key, truncate, meta, self.app_id, batch.version):
            raise RetryableError(
                f"{self.base.name}: another writer committed its write {batch.version} meanwhile "
                "(a second `changelake run` on the same lake?); starting again from what the "
                "table holds"
            )


class Index:
    """The batch's rows to the table's search index, versioned by LSN; documents OpenSearch
    refuses go to `_errors`."""

    step, commits = "index", False

    def __init__(self, search: SearchSink, errors: ErrorsSink, topic: str) -> None:
        self.search, self.errors, self.topic = search, errors, topic

    def setup(self) -> None:
        pass

    def write(self, batch: AppliedBatch) -> None:
        assert batch.rows is not None
        stats = batch.stats
        result = self.search.apply(batch.rows, batch.key, stats.truncate_lsn)
        stats.indexed, stats.stale = result.written, result.stale
        if result.rejected:
            stats.errors += len(result.rejected)
            spark = batch.rows.sparkSession
            self.errors.write(rejected_frame(spark, self.topic, self.search.alias, result.rejected))
        self.search.record(batch.meta.max_lsn, batch.meta.max_source_ts, batch.meta.writes)


class Events:
    """An event table's changes (a truncate too), appended as they came, each once: a change
    Debezium sent again (at a position already written) is skipped."""

    step, commits = "append", True

    def __init__(self, base: DeltaSink) -> None:
        self.base = base

    def setup(self) -> None:
        pass

    def write(self, batch: AppliedBatch) -> None:
        stats = batch.stats
        rows = batch.decoded.changes
        assert rows is not None
        rows = rows.drop(TOASTED)
        if stats.max_position is None:  # nothing stamped: nothing to skip, no sort
            self.base.append(rows.drop(POSITION), batch.meta)
            return
        self.base.append(first_deliveries(rows, batch.delivered, (PARTITION, OFFSET)), batch.meta)
        stats.redelivered = stats.changes + stats.truncates - self.base.written_rows()
