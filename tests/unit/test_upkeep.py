"""The run's upkeep packs a base table's small files beside the stream, and a batch's write that
an OPTIMIZE beat to the commit is made again: the table still equals the changes. A local
Spark session and Delta tables under tmp_path; no services."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from changelake.apply.upkeep import SMALL_FILES, Upkeep
from changelake.lake.commits import CommitMeta
from changelake.sinks.delta import DeltaSink
from changelake.sinks.delta_jvm import DeltaJvm
from changelake.tables import TableRef
from tests.unit.test_base_writes import BASE, ts

META = CommitMeta("apply", "p.public.t", {"0": 9}, 900, None, ("id",))


def _files(spark: SparkSession, path: str) -> int:
    return int(spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["numFiles"])  # type: ignore[index]


def _rows(spark: SparkSession, path: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())


def test_a_table_of_many_small_files_is_packed_once(spark: SparkSession, tmp_path: Path) -> None:
    ref = TableRef("public", "t", "p.public.t", "c", "s")
    lake = str(tmp_path / "lake")
    base = DeltaSink(spark, ref.path(lake), ref.name)
    rows = [(i, f"v{i}", 100 + i, "r", ts(100 + i)) for i in range(200)]
    frame = spark.createDataFrame(rows, BASE).repartition(SMALL_FILES + 6)
    frame.write.format("delta").option("userMetadata", META.to_json()).save(base.path)
    changed = spark.createDataFrame(
        [(i, "new", 1000 + i, "u", ts(1000)) for i in range(0, 200, 7)], BASE
    )
    assert base.write_changes(changed, ("id",), None, META, "app", 1)  # deletion vectors too
    want = _rows(spark, base.path)
    said: list[str] = []
    upkeep = Upkeep(spark, lake, lambda: [ref], said.append)
    assert upkeep.pack_if_due(ref)
    assert _files(spark, base.path) == 1 and _rows(spark, base.path) == want
    assert len(said) == 1 and said[0].startswith(f"t: packed {SMALL_FILES + 7} small files")
    assert not upkeep.pack_if_due(ref)  # nothing left to pack


def test_a_write_beaten_to_its_commit_by_an_optimize_is_made_again(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = DeltaSink(spark, str(tmp_path / "t"), "t")
    rows = [(i, f"v{i}", 100 + i, "r", ts(100 + i)) for i in range(50)]
    spark.createDataFrame(rows, BASE).repartition(4).write.format("delta").option(
        "userMetadata", META.to_json()
    ).save(base.path)
    marked = DeltaJvm.deletion_vectors
    optimized: list[int] = []

    def optimize_first(self: DeltaJvm, *args: Any) -> Any:
        if not optimized:  # another writer commits between the write's read and its commit
            optimized.append(1)
            spark.sql(f"OPTIMIZE delta.`{base.path}`").collect()
        return marked(self, *args)

    monkeypatch.setattr(DeltaJvm, "deletion_vectors", optimize_first)
    changed = [(i, "new", 500 + i, "u", ts(500)) for i in range(0, 50, 5)]
    gone = [(3, None, 600, "d", ts(600))]
    assert base.write_changes(
        spark.createDataFrame(changed + gone, BASE), ("id",), None, META, "app", 1
    )
    assert optimized
    want = {r[0]: r for r in rows} | {r[0]: r for r in changed}
    del want[3]
    assert _rows(spark, base.path) == sorted(want.values())
