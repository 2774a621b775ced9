"""One batch of a connector's stream: its tables applied side by side, each failing in its own
way; the stream stopped between batches, and a failed batch reaching Spark as one line.

Spark's own stop interrupts a batch in flight, and its check of the interrupted Python batch's
error (a regex over the whole Java trace) overflows the stream thread's stack; the same check
runs on any failure whose text holds a Py4J trace.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from changelake.apply import connector_stream
from changelake.apply.batch_stats import BatchStats
from changelake.apply.connector_batch import BatchFailed, ConnectorBatch, Member
from changelake.apply.streaming_failure import cause
from changelake.exceptions import ChangelakeError, RetryableError
from tests.support import wait_for


def _start(
    spark: SparkSession, tmp_path: Path, apply: Callable[[DataFrame, int], None]
) -> tuple[ConnectorBatch, StreamingQuery]:
    batch = ConnectorBatch({}, spark.sparkContext)
    batch._apply = apply  # type: ignore[method-assign]
    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 5)
        .load()
        .writeStream.foreachBatch(batch)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    return batch, query


def test_a_batch_in_flight_ends_before_its_stream_stops(
    spark: SparkSession, tmp_path: Path
) -> None:
    started, finished = threading.Event(), threading.Event()

    def slow(raw: DataFrame, _batch_id: int) -> None:
        started.set()
        raw.sparkSession.range(200_000_000).selectExpr("sum(id)").collect()  # what stop would cut
        finished.set()

    batch, query = _start(spark, tmp_path, slow)
    assert started.wait(60), "no batch started"
    assert connector_stream.stop(query, batch, wait_s=60)
    assert finished.is_set() and not query.isActive
    assert query.exception() is None


def test_a_failed_batch_gives_spark_one_line_and_keeps_the_cause(
    spark: SparkSession, tmp_path: Path
) -> None:
    def failing(_raw: DataFrame, _batch_id: int) -> None:
        trace = (
            "py4j.protocol.Py4JJavaError: An error occurred while calling o1.x.\n"
            + "\tat x\n" * 5000
        )
        try:
            raise RuntimeError(trace)
        except RuntimeError as inner:
            raise KeyError("id") from inner

    batch, query = _start(spark, tmp_path, failing)
    wait_for(lambda: not query.isActive, 60, "the failing stream to end")
    assert "KeyError: 'id'" in str(query.exception())
    assert "Py4JJavaError" not in str(query.exception())
    assert batch.failure is not None and cause(batch.failure) == "KeyError: 'id'"


class _Applier:
    """Stands in for a table's `TableApplier`: records what it was given, then does `then`."""

    def __init__(self, then: Callable[[], None] = lambda: None):
        self.then, self.got = then, threading.Event()
        self.records: list[tuple[int, int]] = []

    def apply_records(self, records: DataFrame, _batch_id: int, stats: BatchStats) -> None:
        self.records = sorted((r.partition, r.offset) for r in records.collect())
        self.offsets = stats.offsets
        self.then()
        self.got.set()


def _raw(spark: SparkSession, topics: list[str]) -> DataFrame:
    value = b'{"schema":{"type":"struct"},"payload":{"id":1}}'
    rows = [(t, 0, offset, b"k", value) for t in topics for offset in (5, 6)]
    return spark.createDataFrame(
        rows, "topic string, partition int, offset long, key binary, value binary"
    )


def test_each_table_gets_its_records_and_a_failing_one_fails_the_batch_after_the_others(
    spark: SparkSession,
) -> None:
    failed = threading.Event()

    def fails() -> None:
        failed.set()
        raise KeyError("id")

    def slow() -> None:  # still applying when the other table has failed
        assert failed.wait(60)

    def own_problem() -> None:
        raise ChangelakeError("column v: changed type")

    def service_away() -> None:
        raise RetryableError("opensearch down")

    appliers = {
        t: _Applier(then)
        for t, then in (("a", fails), ("b", slow), ("c", own_problem), ("d", service_away))
    }
    members = {t: Member(a) for t, a in appliers.items()}  # type: ignore[arg-type]
    batch = ConnectorBatch(members, spark.sparkContext)
    raised = None
    try:
        batch(_raw(spark, ["a", "b", "c", "d", "unknown"]), 0)
    except BatchFailed as exc:
        raised = exc
    assert raised is not None and str(raised) == "KeyError: 'id'"
    assert appliers["b"].got.is_set(), "the batch ended while a table was still applying"
    assert appliers["b"].records == [(0, 5), (0, 6)] and appliers["b"].offsets == {"0": 7}
    assert members["c"].error == "column v: changed type" and members["c"].retry is None
    assert members["d"].retry == "opensearch down" and members["d"].error is None
    assert batch.failure is not None and cause(batch.failure) == "KeyError: 'id'"

    appliers["b"].got.clear()
    batch(_raw(spark, ["b", "c", "d"]), 1)  # stopped and set-aside tables are skipped
    assert appliers["b"].got.is_set()
    assert not appliers["c"].got.is_set() and not appliers["d"].got.is_set()


def test_a_batch_outlasting_the_stop_has_its_tables_spark_jobs_cancelled(
    spark: SparkSession, tmp_path: Path
) -> None:
    started = threading.Event()

    def endless() -> None:  # a table's job that would run for many minutes
        started.set()
        spark.range(10**12).selectExpr("max(id)").collect()

    members = {"a": Member(_Applier(endless))}  # type: ignore[arg-type]
    batch = ConnectorBatch(members, spark.sparkContext)
    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 5)
        .load()
        .selectExpr(
            "'a' AS topic",
            "0 AS partition",
            "value AS offset",
            "CAST('k' AS BINARY) AS key",
            """CAST('{"schema":{},"payload":{}}' AS BINARY) AS value""",
        )
        .writeStream.foreachBatch(batch)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    assert started.wait(60), "no batch started"
    assert not connector_stream.stop(query, batch, wait_s=0.1)
    assert not query.isActive
    tracker = spark.sparkContext.statusTracker()  # nothing of the batch runs on, unseen
    wait_for(lambda: not tracker.getActiveJobsIds(), 30, "the table's job to be cancelled")


def test_a_streams_batches_run_without_adaptive_execution_and_the_pipeline_keeps_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    """AQE runs each shuffle of a batch's small queries as a job of its own: the batches go
    without it (connector_stream.batch_session), the pipeline's own session keeps it."""
    seen: list[str] = []

    def note(raw: DataFrame, _batch_id: int) -> None:
        seen.append(str(raw.sparkSession.conf.get("spark.sql.adaptive.enabled")))

    query = (
        connector_stream.batch_session(spark)
        .readStream.format("rate")
        .option("rowsPerSecond", 5)
        .load()
        .writeStream.foreachBatch(note)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        wait_for(lambda: bool(seen), 60, "a batch")
    finally:
        query.stop()
    assert seen[0] == "false"
    assert spark.conf.get("spark.sql.adaptive.enabled") == "true"
