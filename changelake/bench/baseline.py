"""The pipeline users copy, run on the same topics for comparison: Structured Streaming with a
foreachBatch MERGE per micro-batch, as in Delta's documentation ("write change data into a Delta
table": the newest change per key by its timestamp, then one MERGE that deletes, updates or
inserts). No LSN guard, no TOAST handling, no separate snapshot path, no tuning.

    python -m changelake.bench.baseline JOBS_JSON   # [{topic, key, path, checkpoint, schema}]
    python -m changelake.bench.baseline --stream JOBS_JSON

Every table's query runs at once in one Spark session, as the users' job would; the command
prints the seconds until all of them had applied what their topics held at the start. With
`--stream` the queries start at their topics' ends and run a micro-batch every second (as
`changelake run` does in the bench) until SIGTERM or SIGINT; `STREAMING` is printed once every
query runs. Each query's checkpoint says when each batch ended (its commit file) and up to which
offsets it read: the bench reads its freshness from there, so the job does no work of ours.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.query import StreamingQuery

from changelake.settings import load_settings
from changelake.spark import session


def as_sent(schema: T.StructType) -> T.StructType:
    """The row as Debezium's JSON carries it: times as numbers, which is what users parse."""

    def sent(t: T.DataType) -> T.DataType:
        if isinstance(t, T.TimestampType | T.TimestampNTZType):
            return T.LongType()
        if isinstance(t, T.DateType):
            return T.IntegerType()
        return t

    return T.StructType([T.StructField(f.name, sent(f.dataType)) for f in schema.fields])


def upsert(
    table: DeltaTable, row: T.StructType, key: list[str]
) -> Callable[[DataFrame, int], None]:
    envelope = T.StructType(
        [
            T.StructField(
                "payload",
                T.StructType(
                    [
                        T.StructField("op", T.StringType()),
                        T.StructField("ts_ms", T.LongType()),
                        T.StructField("before", row),
                        T.StructField("after", row),
                    ]
                ),
            )
        ]
    )

    def apply(batch: DataFrame, _batch_id: int) -> None:
        changes = (
            batch.where(F.col("value").isNotNull())
            .select(F.from_json(F.col("value").cast("string"), envelope)["payload"].alias("p"))
            .where(F.col("p.op").isin("c", "u", "d", "r"))
            .select(
                *(F.coalesce(F.col(f"p.after.{k}"), F.col(f"p.before.{k}")).alias(k) for k in key),
                F.struct(
                    F.col("p.ts_ms").alias("time"),
                    F.col("p.after").alias("newValue"),
                    (F.col("p.op") == "d").alias("deleted"),
                ).alias("otherCols"),
            )
        )
        latest = changes.groupBy(*key).agg(F.max("otherCols").alias("latest"))
        values: dict[str, str | Column] = {
            f.name: F.col(f"s.latest.newValue.{f.name}") for f in row.fields
        }
        (
            table.alias("t")
            .merge(latest.alias("s"), " AND ".join(f"t.{k} = s.{k}" for k in key))
            .whenMatchedDelete(condition="s.latest.deleted = true")
            .whenMatchedUpdate(set=values)
            .whenNotMatchedInsert(condition="s.latest.deleted = false", values=values)
            .execute()
        )

    return apply


@dataclass(frozen=True)
class Job:
    topic: str
    key: list[str]
    path: str
    checkpoint: str
    row: T.StructType


STREAMING = "STREAMING"  # printed by --stream once every query runs
TRIGGER = "1 second"  # --stream's micro-batch interval: the bench runs changelake with 1 s too


def start(spark: SparkSession, bootstrap: str, job: Job, stream: bool = False) -> StreamingQuery:
    if not DeltaTable.isDeltaTable(spark, job.path):
        spark.createDataFrame([], job.row).write.format("delta").save(job.path)
    writer = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", job.topic)
        .option("startingOffsets", "latest" if stream else "earliest")
        .option("failOnDataLoss", "false")
        .load()
        .writeStream.foreachBatch(upsert(DeltaTable.forPath(spark, job.path), job.row, job.key))
        .option("checkpointLocation", job.checkpoint)
    )
    if stream:
        return writer.trigger(processingTime=TRIGGER).start()
    return writer.trigger(availableNow=True).start()


def run(spark: SparkSession, bootstrap: str, jobs: list[Job]) -> float:
    """Apply everything the topics hold now; returns the seconds until every query ended."""
    started = time.monotonic()
    queries = [start(spark, bootstrap, job) for job in jobs]
    for query in queries:
        query.awaitTermination()
    return time.monotonic() - started


def stream(spark: SparkSession, bootstrap: str, jobs: list[Job]) -> None:
    """Run every query until SIGTERM or SIGINT, then stop them."""
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    queries = [start(spark, bootstrap, job, stream=True) for job in jobs]
    print(STREAMING, flush=True)
    while not stopping.wait(0.5):
        if failed := [q for q in queries if not q.isActive]:
            raise RuntimeError(f"baseline query {failed[0].name} ended: {failed[0].exception()}")
    for query in queries:
        query.stop()


def main(argv: list[str]) -> int:
    streaming = argv[:1] == ["--stream"]
    argv = argv[1:] if streaming else argv
    settings = load_settings()
    spark = session(settings, app="changelake-bench-baseline")
    jobs = [
        Job(
            j["topic"],
            j["key"],
            j["path"],
            j["checkpoint"],
            as_sent(T.StructType.fromJson(j["schema"])),
        )
        for j in json.loads(argv[0])
    ]
    if streaming:
        stream(spark, settings.kafka_bootstrap, jobs)
    else:
        print(json.dumps({"seconds": run(spark, settings.kafka_bootstrap, jobs)}))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
