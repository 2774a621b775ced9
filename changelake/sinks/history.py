"""A table's stored history (views/history.py): every change appended, never merged, beside
the base table at `<lake>/<prefix>/_history/<schema>/<table>`. No deletion vectors: any Delta
reader reads it. It records no offsets of its own: a batch appends to it before its base table
commit (whose offsets the stream restarts from), so a crash in between replays the batch into
it, which the view's dedup by position makes harmless.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from changelake.changelog.decode import LSN, OFFSET, OP, PARTITION, SOURCE_TS, TX
from changelake.lake.layout import APPENDED_OFTEN, DELETED, DELETED_AT, data_schema, delta_exists
from changelake.sinks.delta import keep_properties


class HistorySink:
    def __init__(self, spark: SparkSession, path: str) -> None:
        self.spark, self.path = spark, path

    def exists(self) -> bool:
        return delta_exists(self.spark, self.path)

    def append(self, rows: DataFrame) -> None:
        """One commit of changes (a column the table gained since is added: mergeSchema)."""
        (
            rows.write.format("delta")
            .mode("append")
            .option("mergeSchema", "true")
            .option("delta.enableDeletionVectors", "false")
            .options(**APPENDED_OFTEN)
            .save(self.path)
        )

    def keep_properties(self) -> None:
        """A history made before APPENDED_OFTEN was set gets it."""
        keep_properties(self.spark, self.path, APPENDED_OFTEN)

    def data_schema(self) -> T.StructType:
        """Its columns, without the change's own (LSN, op, time, Kafka position)."""
        return data_schema(self.spark, self.path, {LSN, OP, SOURCE_TS, PARTITION, OFFSET, TX})

    def seed(self, current: DataFrame) -> None:
        """Start the history from the table's rows as they are (`current`, live rows only):
        each one version, from the change that made it; what came before is not known."""
        rows = current.drop(DELETED, DELETED_AT).select(
            "*",
            F.lit(None).cast("int").alias(PARTITION),
            F.lit(None).cast("long").alias(OFFSET),
            F.lit(None).cast("long").alias(TX),
        )
        position = (LSN, OP, SOURCE_TS, PARTITION, OFFSET, TX)
        ordered = [c for c in rows.columns if c not in position]
        self.append(rows.select(*ordered, OP, LSN, SOURCE_TS, PARTITION, OFFSET, TX))
