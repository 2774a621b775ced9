"""The demo shop end to end, through the shipped connector: after the snapshot and after a mixed
demo load, every derived table equals its Postgres table row by row and column by column."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pipelines import kafka_io, tables
from pipelines.demo.load import run_load
from pipelines.demo.seed import seed
from pipelines.read.table import covered
from pipelines.read.verify.history_check import check_history
from pipelines.settings import Settings
from pipelines.sinks.changelog import changelog_of
from pipelines.sinks.history import history_of
from tests.compare import assert_read_outside_spark, assert_same, text_columns
from tests.support import changelake, changelake_here

pytestmark = pytest.mark.stack
KEYS = {
    "customers": ["id"],
    "products": ["sku"],
    "orders": ["id"],
    "order_lines": ["order_id", "line_no"],
}


def _assert_shop_equal(spark: SparkSession, dsn: str, lake: Path) -> None:
    for table, key in KEYS.items():
        json_columns = {"profile"} if table == "customers" else set()
        assert_same(spark, dsn, f"public.{table}", f"{lake}/shop/public/{table}", key, json_columns)


def _assert_open_to_other_readers(dsn: str, lake: Path) -> None:
    """After a `--once` run every base table is current on its own, and readers without Spark
    see it row by row equal to the source: Polars and delta-rs (no deletion vectors unless
    lake.json asks, so delta-rs' to_pyarrow_table reads them). Both read the changelogs."""
    for table, key in KEYS.items():
        path = f"{lake}/shop/public/{table}"
        frame = pl.read_delta(path)
        readers = {
            "polars": frame.to_dicts(),
            "delta-rs": DeltaTable(path).to_pyarrow_table().to_pylist(),
        }
        json_columns = {"profile"} if table == "customers" else set()
        assert_read_outside_spark(
            dsn, f"public.{table}", key, readers, text_columns(frame), json_columns
        )
        changelog = Path(changelog_of(path))
        if changelog.exists():
            assert "_cdc_lsn" in DeltaTable(str(changelog)).to_pyarrow_table().column_names
            assert "_cdc_lsn" in pl.read_delta(str(changelog)).columns


def _assert_history(
    spark: SparkSession, settings: Settings, lake: Path, after: dict[str, int]
) -> None:
    """customers_history (views.json): its current versions are the table's rows (which equal
    the source), and it holds one version for each insert and update in the topic since the
    snapshot (`after`: the snapshot's end offsets), each once."""
    (ref,) = tables.captured(settings, ["customers"])
    assert ref.history == "customers_history"
    found = check_history(spark, ref, str(lake))
    assert found.equal and found.rows > 0, found
    start = {int(p): o for p, o in after.items()}
    records = kafka_io.read(settings.kafka_bootstrap, ref.topic, start)
    made = sum(1 for r in records if r.payload and r.payload["op"] in ("c", "u", "r"))
    stored = spark.read.format("delta").load(history_of(ref.path(str(lake))))
    versions = stored.where(F.col("_kafka_offset").isNotNull() & (F.col("_cdc_op") != "d"))
    assert versions.count() == made > 0  # a replayed batch would have written some twice


def test_shop_snapshot_and_demo_load(
    settings: Settings, admin_dsn: str, spark: SparkSession, tmp_path: Path
) -> None:
    changelake("connectors", "apply")
    env = {
        **os.environ,
        "CHANGELAKE_LAKE": str(tmp_path / "lake"),
        "CHANGELAKE_CHECKPOINTS": str(tmp_path / "checkpoints"),
    }
    seed(admin_dsn, 300, progress=lambda _: None)

    snapshot = changelake("run", "--once", env=env)  # the command as its own process, once
    assert "customers: snapshot" in snapshot.stdout, snapshot.stdout
    _assert_shop_equal(spark, admin_dsn, tmp_path / "lake")
    snapshotted = covered(spark, f"{tmp_path}/lake/shop/public/customers")
    assert snapshotted is not None
    customers_then = spark.read.format("delta").load(f"{tmp_path}/lake/shop/public/customers")
    count_then = customers_then.count()

    load = run_load(admin_dsn, rate=40, seconds=8, progress=lambda _: None)
    assert load.transactions > 100
    applied = changelake_here("run", "--once", env=env)
    assert "changes from" in applied.stdout, applied.stdout
    _assert_shop_equal(spark, admin_dsn, tmp_path / "lake")
    _assert_open_to_other_readers(admin_dsn, tmp_path / "lake")
    _assert_history(spark, settings, tmp_path / "lake", snapshotted.offsets)
    # Queryable by its name: as of a past LSN (the snapshot's), the customers as they were then.
    at = snapshotted.max_lsn
    then = (
        f"SELECT count(*) AS n FROM customers_history WHERE _valid_from_lsn <= {at} "
        f"AND (_valid_to_lsn IS NULL OR _valid_to_lsn > {at})"
    )
    shown = changelake_here("query", then, "--json", env=env).stdout
    assert json.loads(shown) == [{"n": count_then}]  # not the customers the load added
