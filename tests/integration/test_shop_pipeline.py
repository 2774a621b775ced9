"""The demo shop end to end, through the shipped connector: after the snapshot and after a mixed
demo load, every derived table equals its Postgres table row by row and column by column."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from pipelines.demo.load import run_load
from pipelines.demo.seed import seed
from pipelines.settings import Settings
from pipelines.sinks.changelog import changelog_of
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

    load = run_load(admin_dsn, rate=40, seconds=8, progress=lambda _: None)
    assert load.transactions > 100
    applied = changelake_here("run", "--once", env=env)
    assert "changes from" in applied.stdout, applied.stdout
    _assert_shop_equal(spark, admin_dsn, tmp_path / "lake")
    _assert_open_to_other_readers(admin_dsn, tmp_path / "lake")
