"""One connector's streaming query: started over its tables' topics, each from the offsets its
own commits record, and stopped only between batches (`connector_batch` says why)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from changelake import lakefs
from changelake.apply.connector_batch import ConnectorBatch, Member
from changelake.apply.run_options import RunOptions
from changelake.apply.run_state import Stream
from changelake.spark import kafka_options

CANCEL_EVERY_S = 1.0  # a batch outlasting a stop's wait has its Spark jobs cancelled this often


def start(
    spark: SparkSession,
    bootstrap: str,
    checkpoints: str,
    connector: str,
    members: dict[str, Member],
    offsets: dict[str, dict[str, int]],
    options: RunOptions,
) -> tuple[StreamingQuery, ConnectorBatch]:
    """The query over the topics of `members` (by topic), each from its `offsets`, and the
    function that applies its batches."""
    # A fresh checkpoint every start: where each table stands is in its own commits, and a
    # table stopped meanwhile must not be carried past what it applied.
    checkpoint = f"{checkpoints.rstrip('/')}/_connectors/{connector}"
    lakefs.delete(spark, checkpoint)
    raw = (
        batch_session(spark)
        .readStream.format("kafka")
        .options(**kafka_options(spark, bootstrap, sorted(members)))
        .option("startingOffsets", json.dumps(offsets))
        # Spark caps the query's batch, all its topics together; the setting is per table.
        .option("maxOffsetsPerTrigger", str(options.max_records_per_batch * len(members)))
        .option("includeHeaders", "true")  # a key update's records say so in theirs
        .load()
    )
    batch = ConnectorBatch(members, spark.sparkContext)
    writer = (
        raw.writeStream.foreachBatch(batch)
        .queryName(f"changelake-{connector}")
        .option("checkpointLocation", checkpoint)
    )
    if options.once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{options.trigger_seconds} seconds")
    return writer.start(), batch


def batch_session(spark: SparkSession) -> SparkSession:
    """The session a stream's batches run in: the pipeline's, without adaptive query execution.
    A batch is a few small queries per table; AQE runs each shuffle as a job of its own and
    plans again after it, which cost more than it saved (a round of four tables' few hundred
    changes: 7.3 s with it, 5.7 s without, medians of five). The views' rounds, continuous
    verification and queries keep it in the pipeline's own session."""
    session = spark.newSession()
    session.conf.set("spark.sql.adaptive.enabled", "false")
    return session


def stop(query: StreamingQuery, batch: ConnectorBatch, wait_s: float) -> bool:
    """Stop `query`, whose function is `batch`, once its batch in flight ends. False when that
    batch outlasted `wait_s`: its Spark jobs are cancelled then (Spark's own stop reaches only
    its stream thread, and the tables run on threads of ours)."""
    idle = batch.close(wait_s)
    if not idle:
        batch.cancel()
        while not batch.close(CANCEL_EVERY_S):  # a job one of its tables started meanwhile
            batch.cancel()
    query.stop()
    return idle


def await_each(streams: Iterable[Stream]) -> None:
    """A moment's wait on each stream still running (`run --once`): a failed query raises here,
    and the run reads its exception when it next looks at the stream."""
    from pyspark.errors import StreamingQueryException

    for stream in streams:
        if stream.query is not None and stream.query.isActive:
            with contextlib.suppress(StreamingQueryException):
                stream.query.awaitTermination(1)
