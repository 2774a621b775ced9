"""What a micro-batch holds per table, counted before and after decoding: offsets, changes,
truncates, TOAST, bad records and where each phase's time went. Counted by aggregations the
batch needs anyway, so no action runs just to count."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from changelake.changelog.batch import Decoded
from changelake.changelog.decode import LSN, NOTE, OP, REASON, SOURCE_TS, TOASTED
from changelake.changelog.key_changes import Mark, marks_column, marks_of
from changelake.changelog.redelivery import POSITION, Position, as_position


@dataclass
class BatchStats:
    records: int = 0
    changes: int = 0
    errors: int = 0  # dead letters written, and documents OpenSearch rejected
    # dead letters to write: records that cannot be applied (malformed, failing their type
    # checks), and rows applied with NULL for a value no decimal holds (a NaN)
    bad: int = 0
    truncate_lsn: int | None = None
    truncate_ts: str | None = None
    toasted: int = 0
    deletes: int = 0
    max_lsn: int = 0
    max_source_ts: str | None = None
    offsets: dict[str, int] = field(default_factory=dict)
    indexed: int = 0
    stale: int = 0  # documents OpenSearch already held at a newer version
    resent: int = 0  # key updates whose new row Debezium was asked to send again
    truncates: int = 0
    # An event table's: the highest position Debezium stamped (`redelivery`), and the changes
    # skipped as sent before.
    max_position: Position | None = None
    redelivered: int = 0
    marks: list[Mark] = field(default_factory=list)  # the batch's key-change records
    # Each schema version's first record (partition, offset), when `record_stats` counted them.
    firsts: dict[int, tuple[int, int]] | None = None
    jobs: int = 0  # Spark jobs the table's part of the batch ran
    phases: dict[str, float] = field(default_factory=dict)  # seconds spent in each step
    started: float = field(default_factory=time.monotonic)  # when the batch began

    @contextlib.contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.phases[phase] = self.phases.get(phase, 0.0) + time.monotonic() - started


_ISO = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"


def record_stats(env: DataFrame) -> dict[str, BatchStats]:
    """Per topic, what the records say before decoding: offsets, counts, key-change marks, how
    many are not even an envelope, and where each schema version first appears (so decoding
    needs no job of its own to find the versions); one small aggregation for every table."""
    stats: dict[str, BatchStats] = {}
    groups = env.groupBy("topic", "partition", "version_id").agg(
        F.max("offset"), F.count("*"), marks_column(), F.count("odd_text"), F.min("offset")
    )
    for topic, partition, version, last, count, marks, odd, first in groups.collect():
        found = stats.setdefault(str(topic), BatchStats(firsts={}))
        at = str(partition)
        found.offsets[at] = max(int(last) + 1, found.offsets.get(at, 0))
        found.records += int(count)
        found.marks += marks_of(int(partition), marks)
        found.bad += int(odd)
        if version is not None and found.firsts is not None:
            here = (int(partition), int(first))
            found.firsts[int(version)] = min(here, found.firsts.get(int(version), here))
    return stats


def add_change_stats(stats: BatchStats, decoded: Decoded) -> BatchStats:
    """Everything the write, the commit metadata and the dead letters need from the decoded
    rows, in one aggregation over the cached rows (good and bad alike)."""
    stats.bad += decoded.unresolved
    if decoded.rows is None:
        return stats
    good = F.col(REASON).isNull()
    truncate = good & (F.col(OP) == "t")
    agg = decoded.rows.agg(
        F.count(F.when(good & (F.col(OP) != "t"), True)),
        F.max(F.when(truncate, F.col(LSN))),
        F.count(F.when(good & (F.size(TOASTED) > 0), True)),
        F.max(F.when(good, F.col(LSN))),
        F.date_format(F.max(F.when(good, F.col(SOURCE_TS))), _ISO),
        F.count(F.when(~good | F.col(NOTE).isNotNull(), True)),  # each a dead letter
        F.count(F.when(good & (F.col(OP) == "d"), True)),
        F.date_format(F.max_by(F.col(SOURCE_TS), F.when(truncate, F.col(LSN))), _ISO),
        F.count(F.when(truncate, True)),
        # An event table's rows carry where Debezium read them; a keyed table's do not.
        F.max(F.when(good, F.col(POSITION))) if POSITION in decoded.rows.columns else F.lit(None),
    ).first()
    assert agg is not None
    stats.changes, stats.truncate_lsn, stats.toasted = int(agg[0]), agg[1], int(agg[2])
    stats.max_lsn = int(agg[3] or 0)
    stats.max_source_ts = agg[4]  # ISO 8601 in UTC (the session's zone)
    stats.bad += int(agg[5])
    stats.deletes, stats.truncate_ts = int(agg[6]), agg[7]
    stats.truncates = int(agg[8])
    stats.max_position = as_position(agg[9])
    return stats
