"""Frames held while the pipeline writes the tables they read (`spark.held`)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from changelake.spark import held


def _cached_blocks(spark: SparkSession, frame: DataFrame) -> int:
    """How many partitions of the RDD under `frame`'s plan the block manager holds."""
    rdd_id = frame._jdf.queryExecution().logical().rdd().id()
    infos = spark.sparkContext._jsc.sc().getRDDStorageInfo()
    return sum(i.numCachedPartitions() for i in infos if i.id() == rdd_id)


def test_a_frame_held_over_a_write_to_its_table_keeps_its_rows_then_frees_them(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = str(tmp_path / "table")
    spark.range(100).write.format("delta").save(path)
    with held(spark.read.format("delta").load(path), reads_tables=True) as frame:
        spark.range(100, 150).write.format("delta").mode("append").save(path)
        assert sorted(r.id for r in frame.collect()) == list(range(100))  # read once, before
        assert _cached_blocks(spark, frame) > 0
    assert _cached_blocks(spark, frame) == 0
