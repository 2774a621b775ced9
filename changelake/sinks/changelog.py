"""A table's changelog: each batch's newest change per key, appended, never merged (merge-on-read,
docs/pipeline.md).

Its rows are what a MERGE into the base table takes (the table's columns, `_cdc_lsn`, `_cdc_op`,
`_cdc_source_ts`), where each came from (`_kafka_partition`, `_kafka_offset`, so readers order
replays), and the compaction epoch the row was appended in, the table's one partition column:
compaction folds the epochs up to one into the base table, then deletes them, which removes
whole partitions and so never conflicts with an append to a later epoch. No deletion vectors:
any Delta reader reads it. Each append is one commit recording in its metadata the offsets it
covers; the stream starts from those.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from changelake.changelog.decode import OFFSET, PARTITION
from changelake.lake.commits import CommitMeta
from changelake.lake.layout import APPENDED_OFTEN, EPOCH, META_COLUMNS, data_schema, delta_exists, q
from changelake.sinks.delta import keep_properties

KEEP_DROPPED_HOURS = 1  # a dropped epoch's files stay on disk this long (then VACUUM)


class ChangelogSink:
    def __init__(self, spark: SparkSession, path: str):
        self.spark, self.path = spark, path

    def append(self, rows: DataFrame, epoch: int, meta: CommitMeta) -> None:
        """One commit: the batch's rows in `epoch`, and in its metadata the offsets they cover
        (the stream restarts from those, so no batch is appended twice). A column the table
        gained since the last append is added (mergeSchema)."""
        (
            rows.withColumn(EPOCH, F.lit(epoch))
            .write.format("delta")
            .mode("append")
            .partitionBy(EPOCH)
            .option("userMetadata", meta.to_json())
            .option("mergeSchema", "true")
            .option("delta.enableDeletionVectors", "false")
            .options(**APPENDED_OFTEN)
            .option("delta.deletedFileRetentionDuration", f"interval {KEEP_DROPPED_HOURS} hours")
            .save(self.path)
        )

    def rows(self, after_epoch: int, through_epoch: int | None = None) -> DataFrame:
        """The rows appended after `after_epoch` (the base table's compacted epoch), up to and
        including `through_epoch`; without the epoch column."""
        rows = self.spark.read.format("delta").load(self.path)
        wanted = F.col(EPOCH) > F.lit(after_epoch)
        if through_epoch is not None:
            wanted &= F.col(EPOCH) <= F.lit(through_epoch)
        return rows.where(wanted).drop(EPOCH)

    def drop_through(self, epoch: int) -> None:
        """Delete the epochs up to `epoch` (compacted into the base table). The commit records
        nothing: the last commit that says what the changelog covers is an append's."""
        from delta.tables import DeltaTable

        DeltaTable.forPath(self.spark, self.path).delete(F.col(EPOCH) <= F.lit(epoch))

    def vacuum(self) -> None:
        """Remove the files of epochs dropped more than KEEP_DROPPED_HOURS ago (a reader that
        pinned a version before their drop has had that long to finish)."""
        # LITE finds them in the log instead of listing every file: seconds, not half a minute.
        self.spark.sql(f"VACUUM delta.{q(self.path)} LITE").collect()

    def exists(self) -> bool:
        return delta_exists(self.spark, self.path)

    def keep_properties(self) -> None:
        """A changelog made before APPENDED_OFTEN was set gets it."""
        keep_properties(self.spark, self.path, APPENDED_OFTEN)

    def data_schema(self) -> T.StructType:
        """The table's columns, without where each row came from."""
        return data_schema(self.spark, self.path, {*META_COLUMNS, PARTITION, OFFSET, EPOCH})
