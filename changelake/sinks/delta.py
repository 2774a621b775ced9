"""A table's base Delta table: created by one snapshot append, then changed by one merge-on-write
commit per batch of the stream.

Every commit records, in its userMetadata, the Kafka offsets it covers (the next offset to read
per partition), the highest LSN and source commit time applied, and the key. A batch's commit is
named by Delta's transaction identifiers (application id + the table's write number); the LSN
guard makes any replayed change a no-op as well. Base tables keep deletion vectors: a changed
row is marked, not rewritten with its file (sinks/merge_on_write.py).
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from changelake.changelog.evolution import Evolution
from changelake.changelog.plan import Truncate
from changelake.exceptions import RetryableError
from changelake.lake import delta_log
from changelake.lake.commits import WRITE_CONFLICTS, CommitMeta, latest_commit
from changelake.lake.errors import ERROR_KEY
from changelake.lake.layout import (
    DELETED,
    DELETED_AT,
    EVENT_COLUMNS,
    META_COLUMNS,
    SOFT_COLUMNS,
    data_schema,
    delta_exists,
    q,
)
from changelake.sinks.merge_on_write import BASE_PROPERTIES, Target, write_changes

if TYPE_CHECKING:
    from changelake.tables import TableRef

ERRORS_ATTEMPTS = 5
# A batch's write whose commit another writer (the run's upkeep OPTIMIZE, `changelake maintain`)
# beat is made again from the new version: it wrote nothing yet, and a write is idempotent.
WRITE_ATTEMPTS = 3


def evolve(spark: SparkSession, path: str, evolution: Evolution) -> None:
    """Columns added and types widened, as `evolution` says, in the Delta table at `path`."""
    table = f"delta.{q(path)}"
    if evolution.add:
        cols = ", ".join(f"{q(f.name)} {f.dataType.simpleString()}" for f in evolution.add)
        spark.sql(f"ALTER TABLE {table} ADD COLUMNS ({cols})")
    for f in evolution.widen:
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
        spark.sql(f"ALTER TABLE {table} ALTER COLUMN {q(f.name)} TYPE {f.dataType.simpleString()}")


def keep_properties(spark: SparkSession, path: str, properties: Mapping[str, str]) -> None:
    """Give the Delta table at `path`, if there is one, these table properties where it lacks
    them (a write sets its `delta.*` options only as it creates the table)."""
    if not delta_exists(spark, path):
        return
    # From the log's metadata alone: detail() also counts files and bytes, a read of the whole
    # table state that cost ~1 s per table, and a cold run's first one ~5 s, in its first batch.
    held = {
        r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.{q(path)}").collect()
    }
    stale = {k: v for k, v in properties.items() if held.get(k) != v}
    if stale:
        listed = ", ".join(f"'{k}' = '{v}'" for k, v in stale.items())
        spark.sql(f"ALTER TABLE delta.{q(path)} SET TBLPROPERTIES ({listed})")


class DeltaSink:
    def __init__(self, spark: SparkSession, path: str, name: str, soft_delete: bool = False):
        self.spark, self.path, self.name, self.soft_delete = spark, path, name, soft_delete

    @classmethod
    def of(cls, spark: SparkSession, table: TableRef, lake: str) -> DeltaSink:
        """A captured table's base table in `lake`, with the options lake.json gives it."""
        return cls(spark, table.path(lake), table.name, table.soft_delete)

    def exists(self) -> bool:
        return delta_exists(self.spark, self.path)

    def latest(self) -> tuple[int, CommitMeta | None]:
        """The table's newest version, and the newest commit metadata at or before it."""
        return latest_commit(self.spark, self.path)

    def data_schema(self) -> T.StructType:
        return data_schema(self.spark, self.path, {*META_COLUMNS, *SOFT_COLUMNS, *EVENT_COLUMNS})

    def create(self, rows: DataFrame, meta: CommitMeta) -> None:
        """The snapshot: one append that creates the table and records the offsets it covers."""
        if self.soft_delete:
            rows = rows.withColumn(DELETED, F.lit(False)).withColumn(
                DELETED_AT, F.lit(None).cast("timestamp")
            )
        (
            rows.write.format("delta")
            .mode("append")
            .option("userMetadata", meta.to_json())
            .options(**BASE_PROPERTIES)
            .save(self.path)
        )

    def append(self, rows: DataFrame, meta: CommitMeta) -> None:
        """An event table's batch (or snapshot): its rows appended in one commit recording the
        offsets it covers (the stream restarts from those, so none is appended twice); a column
        the table gained is added (mergeSchema)."""
        (
            rows.write.format("delta")
            .mode("append")
            .option("userMetadata", meta.to_json())
            .option("mergeSchema", "true")
            .option("delta.enableDeletionVectors", "false")
            .save(self.path)
        )

    def written_rows(self) -> int:
        """The rows the table's newest commit wrote, from the metrics in its commit file: no
        scan of the data, and none of the jobs reading the history would start."""
        info = delta_log.commit_info(
            self.spark, self.path, delta_log.newest_version(self.spark, self.path)
        )
        return int((info or {}).get("operationMetrics", {}).get("numOutputRows", 0))

    def evolve(self, evolution: Evolution) -> None:
        evolve(self.spark, self.path, evolution)

    def write_changes(
        self,
        rows: DataFrame,
        key: Sequence[str],
        truncate: Truncate | None,
        meta: CommitMeta,
        app_id: str,
        version: int,
    ) -> bool:
        """The newest change per key, LSN-guarded, as one idempotent commit written at the cost
        of the changes (sinks/merge_on_write.py). `truncate`: one the rows come after, not
        applied to this table yet. False when (`app_id`, `version`) was committed already."""
        target = Target(self.path, tuple(key), self.soft_delete)
        attempts = 1
        while True:
            try:
                return write_changes(target, rows, truncate, meta, app_id, version)
            except WRITE_CONFLICTS:
                if attempts == WRITE_ATTEMPTS:
                    raise
                attempts += 1


class ErrorsSink:
    """The `_errors` table: dead letters, each once, however often its batch is applied."""

    def __init__(self, path: str):
        self.path = path

    def write(self, errors: DataFrame) -> None:
        """Add the rows not there yet, by (topic, partition, offset, reason): a batch applied
        again after a crash adds nothing. Dead letters are rare, so the MERGE this costs is too;
        two tables writing at once conflict, and the later one tries again."""
        spark = errors.sparkSession
        for attempt in range(ERRORS_ATTEMPTS):
            try:
                if not delta_exists(spark, self.path):
                    errors.write.format("delta").mode("append").save(self.path)
                    return
                (
                    DeltaTable.forPath(spark, self.path)
                    .alias("t")
                    .merge(errors.alias("s"), " AND ".join(f"t.{c} <=> s.{c}" for c in ERROR_KEY))
                    .whenNotMatchedInsertAll()
                    .execute()
                )
                return
            except WRITE_CONFLICTS as exc:
                if attempt + 1 == ERRORS_ATTEMPTS:  # the batch (or snapshot) is tried again
                    raise RetryableError(f"dead letters not written to {self.path}: {exc}") from exc
                time.sleep(random.uniform(0.5, 2.0) * (attempt + 1))  # apart from the other writer
