"""How a table joins its connector's stream: its Delta table made sure of (dropped for a
requested resnapshot, snapshotted from its topic when missing), its history started for the
views that read it, and the offsets its stream begins at."""

from __future__ import annotations

import time
from collections.abc import Callable

from pyspark.sql import SparkSession

from changelake import kafka_io, lakefs, progress
from changelake.apply.guards import topic_hint, topic_problem
from changelake.apply.run_report import snapshot_lines
from changelake.apply.snapshot import snapshot
from changelake.capture import rebuild
from changelake.changelog.registry import SchemaRegistry
from changelake.exceptions import ChangelakeError
from changelake.lake.table import covered
from changelake.settings import Settings
from changelake.sinks.delta import DeltaSink
from changelake.tables import TableRef
from changelake.views.table_histories import forget_changes, retire_changelog, start_history

Out = Callable[[str], None]
EARLIEST = -2  # Spark's startingOffsets for a partition the table has applied nothing of


def prepare_table(
    spark: SparkSession,
    settings: Settings,
    ref: TableRef,
    resnapshot: bool,
    schemas: SchemaRegistry,
    snapshotting: Callable[[], None],
    out: Out,
) -> bool | None:
    """Make sure the table exists: False when it did, True when it was snapshotted now (after
    `snapshotting()`), None while its topic is empty. `resnapshot`: drop it first."""
    lake = settings.lake
    sink = DeltaSink.of(spark, ref, lake)
    rebuilt = ref.name in rebuild.marked(settings.run_dir)  # its topic is another database's now
    if rebuilt and ref.events and sink.exists():  # its events are kept: no source has them
        kept = f"{ref.path(lake)}.before-rebuild-{int(time.time())}"
        lakefs.rename(spark, ref.path(lake), kept)
        out(f"{ref.name}: an event table made again; its events until now kept at {kept}")
        forget_changes(spark, ref, lake)
    elif resnapshot or rebuilt:
        out(f"{ref.name}: dropping the derived table to re-snapshot")
        lakefs.delete(spark, ref.path(lake))
        forget_changes(spark, ref, lake)
    if sink.exists():
        retire_changelog(spark, ref, lake, out)
        start_history(spark, ref, lake, out)
        return False
    forget_changes(spark, ref, lake)
    snapshotting()
    started = time.monotonic()
    with progress.spark_tasks(spark, f"{ref.name}: snapshot", out):
        result = snapshot(
            spark,
            settings.kafka_bootstrap,
            schemas,
            ref,
            lake,
            settings.run_dir,
            check=ref.search.check if ref.search else None,
        )
    if result is None:
        return None
    rebuild.unmark(settings.run_dir, ref.name)
    for line in snapshot_lines(ref, result, time.monotonic() - started):
        out(line)
    start_history(spark, ref, lake, out)
    return True


def starting_offsets(
    spark: SparkSession, settings: Settings, ref: TableRef
) -> tuple[dict[str, int], dict[str, int]]:
    """Where the table's commits say it is (partition → next offset), and where its stream
    begins, for every partition of its topic; refuses a topic that cannot continue from there."""
    meta = covered(spark, ref.path(settings.lake))
    applied = {p: int(o) for p, o in (meta.offsets if meta else {}).items()}
    if problem := topic_problem(settings.kafka_bootstrap, ref.topic, applied):
        raise ChangelakeError(f"{problem}. {topic_hint(ref.name)}")
    partitions = kafka_io.watermarks(settings.kafka_bootstrap, ref.topic)
    return applied, {str(p): applied.get(str(p), EARLIEST) for p in sorted(partitions)}
