"""A lake written when changelake kept a changelog beside each base table: the run deletes it,
and says so, once. Nothing in it is lost: the stream resumes where the base table's commits say
(its changes are read from the topic again)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from changelake.lake.layout import delta_exists, retired_changelog_of
from changelake.tables import TableRef
from changelake.views.table_histories import retire_changelog


def test_a_changelog_left_from_before_is_deleted_once(spark: SparkSession, tmp_path: Path) -> None:
    ref = TableRef("public", "t", "p.public.t", "c", "s")
    lake = str(tmp_path / "lake")
    old = retired_changelog_of(ref.path(lake))
    assert old == f"{lake}/p/_changelog/public/t"
    rows = spark.createDataFrame([(1, "a", 10, 1)], "id long, v string, _cdc_lsn long, e int")
    rows.write.format("delta").partitionBy("e").save(old)
    said: list[str] = []
    retire_changelog(spark, ref, lake, said.append)
    assert not delta_exists(spark, old) and not Path(old).exists()
    assert len(said) == 1 and said[0].startswith(f"t: deleting its changelog at {old}")
    retire_changelog(spark, ref, lake, said.append)
    assert len(said) == 1  # nothing left to say
