"""A connector's stream is stopped between batches, and a failed batch reaches Spark as one line.

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

from pipelines.apply.connector_batch import ConnectorBatch, stop_between_batches
from pipelines.apply.streaming_failure import cause
from tests.support import wait_for


def _start(
    spark: SparkSession, tmp_path: Path, apply: Callable[[DataFrame, int], None]
) -> tuple[ConnectorBatch, StreamingQuery]:
    batch = ConnectorBatch({})
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
    assert stop_between_batches(query, batch, wait_s=60)
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
