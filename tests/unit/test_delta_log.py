"""A table's newest version and commit metadata read from its commit files agree with Delta's own
history, across a checkpoint, commits without changelake's metadata, and a table made again."""

from __future__ import annotations

import shutil
from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from pipelines.sinks.delta import CommitMeta, latest_commit
from pipelines.sinks.delta_log import newest_version

_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


def _append(spark: SparkSession, path: str, n: int, meta: CommitMeta | None) -> None:
    if meta is not None:
        spark.conf.set(_USER_METADATA, meta.to_json())
    try:
        writer = spark.range(n, n + 1).write.format("delta").mode("append")
        writer.option("delta.checkpointInterval", "3").save(path)  # a checkpoint every 3
    finally:
        spark.conf.unset(_USER_METADATA)


def _meta(lsn: int) -> CommitMeta:
    return CommitMeta("apply", "t", {"0": lsn}, lsn, None, ("id",))


def test_commit_files_say_what_the_history_says(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    for n in range(5):  # a checkpoint at version 3
        _append(spark, path, n, _meta(n) if n < 3 else None)  # the last two without metadata
    assert (tmp_path / "t" / "_delta_log" / "_last_checkpoint").exists()
    history = DeltaTable.forPath(spark, path).history().select("version").collect()
    assert newest_version(spark, path) == max(r[0] for r in history) == 4
    assert latest_commit(spark, path) == (4, _meta(2))  # the newest commit that has one
    assert newest_version(spark, path, known=1) == 4

    shutil.rmtree(tmp_path / "t")  # made again (a resnapshot): versions start over
    _append(spark, path, 0, _meta(100))
    assert newest_version(spark, path, known=4) == 0
    assert latest_commit(spark, path) == (0, _meta(100))
    assert newest_version(spark, str(tmp_path / "none")) == -1
