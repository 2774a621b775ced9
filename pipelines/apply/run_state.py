"""What a run was asked to do, and where each of its tables stands."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.streaming.query import StreamingQuery

from pipelines.tables import TableRef


@dataclass(frozen=True)
class RunOptions:
    once: bool = False
    resnapshot: tuple[str, ...] = ()
    trigger_seconds: float = 2.0
    compact_seconds: float = 30.0  # how often a streaming run folds a table's changelog in
    max_records_per_batch: int = 50_000


@dataclass
class TableJob:
    ref: TableRef
    state: str = "pending"  # pending, snapshotting, waiting, running, done, stopped
    error: str | None = None
    query: StreamingQuery | None = None
    failures: int = 0
    offsets: dict[str, int] = field(default_factory=dict)  # applied: the next offset to read
    retry_at: float = 0.0
    snapshotted: bool = False  # its index is rebuilt before the stream starts
    batches: int = 0
    changes: int = 0
    errors: int = 0
    stats: dict[str, Any] = field(default_factory=dict)
    applier: Any = None  # the TableApplier of its running query: --once seals through it
