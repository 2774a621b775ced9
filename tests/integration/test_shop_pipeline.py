"""The demo shop end to end, through the shipped connector: after the snapshot and after a mixed
demo load, every derived table equals its Postgres table row by row and column by column."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest
from deltalake import DeltaTable
from deltalake.exceptions import DeltaProtocolError
from pyspark.sql import SparkSession

from pipelines.demo.load import run_load
from pipelines.demo.seed import seed
from pipelines.settings import Settings
from pipelines.sinks.changelog import changelog_path
from tests.compare import assert_same, differences, keyed, pg_numeric_columns, pg_rows
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
        assert_same(spark, dsn, f"public.{table}", f"{lake}/public/{table}", key, json_columns)


def _assert_open_to_other_readers(dsn: str, lake: Path) -> None:
    """After a `--once` run every base table is current on its own, and readers without Spark
    see it: Polars (deletion vectors applied) row by row equal to the source; delta-rs reads
    the changelogs (written without deletion vectors) but refuses the base tables, whose
    protocol needs them: the README's reader table says so, and this notices when it changes."""
    for table, key in KEYS.items():
        path = f"{lake}/public/{table}"
        json_columns = {"profile"} if table == "customers" else set()
        frame = pl.read_delta(path)
        numbers = pg_numeric_columns(dsn, f"public.{table}") & {
            name for name, kind in frame.schema.items() if kind == pl.String
        }
        source = pg_rows(dsn, f"public.{table}", key, json_columns, numbers)
        derived = keyed(frame.to_dicts(), key, json_columns, numbers, f"polars: {path}")
        problems = differences(source, derived)
        assert not problems, f"polars, {table}: " + "\n".join(problems[:10])
        with pytest.raises(DeltaProtocolError, match="deletionVectors"):
            DeltaTable(path).to_pyarrow_table()
        changelog = Path(changelog_path(str(lake), "public", table))
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
