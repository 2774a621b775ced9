"""What a run was asked to do, and where each of its tables stands."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.query import StreamingQuery

from changelake.apply.pipeline_file import TableState
from changelake.lake.commits import furthest
from changelake.tables import TableRef

if TYPE_CHECKING:  # connector_stream imports this module
    from changelake.apply.connector_batch import ConnectorBatch, Member


@dataclass
class TableJob:
    ref: TableRef
    state: TableState = TableState.PENDING
    error: str | None = None
    failures: int = 0
    offsets: dict[str, int] = field(default_factory=dict)  # applied: the next offset to read
    retry_at: float = 0.0
    snapshotted: bool = False  # its index is rebuilt before the stream starts
    batches: int = 0
    changes: int = 0
    errors: int = 0
    stats: dict[str, Any] = field(default_factory=dict)  # its last batch's
    applied_lsn: int = 0  # the highest LSN its batches applied
    counted_at: float = 0.0  # when (time.time) its last batch ended

    def count(self, stats: dict[str, Any]) -> None:
        """Add a batch's figures (called from the stream's thread)."""
        self.batches += 1
        self.failures = 0  # a batch went through: the next failure waits the shortest delay
        self.changes += int(stats.get("changes", 0))
        self.errors += int(stats.get("errors", 0))
        self.stats = stats
        self.applied_lsn = max(self.applied_lsn, int(stats.get("max_lsn") or 0))
        self.counted_at = time.time()
        self.offsets = furthest(self.offsets, stats.get("offsets") or {})


@dataclass
class Stream:
    """One connector's streaming query, and the tables it applies."""

    query: StreamingQuery | None = None
    batch: ConnectorBatch | None = None  # the function that applies its batches
    members: dict[str, Member] = field(default_factory=dict)  # by table


def add_discovered(
    jobs: dict[str, TableJob], found: Iterable[TableRef], out: Callable[[str], None]
) -> None:
    """Tables added to a connector file while the run goes on: a job each, snapshotted once
    its topic has events."""
    for ref in found:
        if ref.name not in jobs:
            out(f"{ref.name}: added to {ref.connector}; snapshotting it when its topic has events")
            jobs[ref.name] = TableJob(ref)


def all_ended(jobs: Iterable[TableJob], once: bool) -> bool:
    """Whether a run has nothing left to do: streaming, when every table stopped (none could
    run again); `--once`, when each is done, stopped, or waiting for a topic that has nothing."""
    states = [j.state for j in jobs]
    if not once:
        return bool(states) and all(s == TableState.STOPPED for s in states)
    return all(s in (TableState.DONE, TableState.STOPPED, TableState.WAITING) for s in states)
