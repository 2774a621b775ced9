"""A table's newest version and commit metadata read from its commit files agree with Delta's own
history, across a checkpoint, commits without changelake's metadata, and a table made again."""

from __future__ import annotations

import shutil
from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from changelake.lake.commits import CommitMeta, latest_commit
from changelake.lake.delta_log import last_present, newest_version

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


def test_the_newest_of_consecutive_versions_takes_few_probes() -> None:
    """Hundreds of commits past a checkpoint (a changelog checkpoints seldom) cost a few probes
    of commit files, not one per commit; from the newest, one probe."""
    for newest in (-1, 0, 1, 2, 7, 8, 9, 500):
        for start in sorted({-1, 0, newest // 2, newest}):
            if start > newest:
                continue
            asked: list[int] = []

            def present(version: int, newest: int = newest, asked: list[int] = asked) -> bool:
                asked.append(version)
                return version <= newest

            assert last_present(present, start) == newest, (newest, start)
            assert len(asked) <= 2 * (newest - start).bit_length() + 1, (newest, start, asked)
            assert min(asked) > start  # never below what is known to be there
