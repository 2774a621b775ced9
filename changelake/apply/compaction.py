"""Compaction: a table's sealed changelog epochs folded into its base table by ONE MERGE, then
deleted from the changelog (merge-on-read, docs/pipeline.md); `compactor.py` decides
when.

Every step is safe to repeat after a crash: the MERGE is guarded by LSN and idempotent by
(application id, epoch), and records the epoch it holds in the base table's commit, so readers
skip those epochs from then on; the delete of compacted epochs removes whole partitions of
epochs no append writes to, so it never conflicts with the stream.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from pyspark.sql import SparkSession

from changelake.apply import faults
from changelake.changelog.decode import OFFSET, PARTITION
from changelake.changelog.evolution import reconcile
from changelake.lake.commits import CommitMeta
from changelake.lake.current_rows import newest_changes
from changelake.lake.layout import changelog_of
from changelake.lake.table import epoch_of, truncate_of
from changelake.sinks.changelog import ChangelogSink
from changelake.sinks.delta import DeltaSink
from changelake.tables import TableRef


@dataclass(frozen=True)
class Sealed:
    table: TableRef
    app_id: str
    epoch: int
    meta: CommitMeta  # what the epoch covers: the last append into it


def compact(
    spark: SparkSession,
    lake: str,
    run_dir: Path,
    sealed: Sealed,
    phases: dict[str, float] | None = None,
    drop: bool = True,
) -> bool:
    """Fold the epochs up to `sealed.epoch` into the base table and (`drop`) delete them from the
    changelog. False when the base table held them already (a repeat after a crash).
    `phases`: where the time went, by step."""
    took = phases if phases is not None else {}
    clock = time.monotonic()

    def lap(step: str) -> None:
        nonlocal clock
        now = time.monotonic()
        took[step] = took.get(step, 0.0) + now - clock
        clock = now

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
        lap("plan")
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
        lap("merge")
        faults.pause_if("after-compaction-merge", ref.name, run_dir)
    if drop:  # readers skip compacted epochs: deleting them only keeps the changelog small
        log.drop_through(sealed.epoch)
        lap("drop")
    return merged
