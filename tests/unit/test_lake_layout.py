"""A lake written before tables lived under their topic prefix: `run` moves each table (its
changelog first) when its commits name its topic, and leaves anything else where it is."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from pipelines.apply.lake_layout import move_legacy
from pipelines.sinks.delta import CommitMeta, DeltaSink
from pipelines.tables import TableRef


def legacy_table(spark: SparkSession, path: Path, topic: str) -> None:
    meta = CommitMeta("snapshot", topic, {"0": 3}, 7, None, ("id",), 3)
    DeltaSink(spark, str(path), path.name).create(spark.range(3), meta)


def test_a_table_of_this_topic_moves_with_its_changelog(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake = str(tmp_path)
    ref = TableRef("public", "orders", "shop.public.orders", "shop-postgres", "changelake_shop")
    legacy_table(spark, tmp_path / "public" / "orders", ref.topic)
    legacy_table(spark, tmp_path / "_changelog" / "public" / "orders", ref.topic)
    said: list[str] = []
    move_legacy(spark, ref, lake, said.append)
    assert ref.path(lake) == f"{lake}/shop/public/orders"
    assert spark.read.format("delta").load(ref.path(lake)).count() == 3
    assert (tmp_path / "shop" / "_changelog" / "public" / "orders" / "_delta_log").is_dir()
    assert not (tmp_path / "public" / "orders").exists()
    assert not (tmp_path / "_changelog" / "public" / "orders").exists()
    assert said == [
        f"orders: moved {lake}/public/orders to {lake}/shop/public/orders (each "
        "connector's tables now live under its prefix)"
    ]


def test_another_topics_table_stays(spark: SparkSession, tmp_path: Path) -> None:
    lake = str(tmp_path)
    ref = TableRef("public", "items", "inv.public.items", "inventory", "inv")
    legacy_table(spark, tmp_path / "public" / "items", "shop.public.items")
    move_legacy(spark, ref, lake, print)
    assert (tmp_path / "public" / "items" / "_delta_log").is_dir()
    assert not (tmp_path / "inv").exists()
