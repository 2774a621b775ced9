"""Fixtures for pipeline tests: one Spark session to read the lake, and a `changelake run` of the
test's own (its own connector, lake and checkpoints under tmp_path)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import psycopg
import pytest
from pyspark.sql import SparkSession

from changelake.capture.caught_up import wait_caught_up
from changelake.capture.source import source_of
from changelake.settings import Settings
from changelake.spark import session
from tests.compare import assert_read_outside_spark, assert_same, delta_rs_rows, text_columns
from tests.support import CLI, ROOT, changelake_here, dies_with_the_suite, wait_for

SIGNAL_TABLE = "changelake.debezium_signal"


@pytest.fixture(scope="session")
def spark(settings: Settings) -> Iterator[SparkSession]:
    os.environ["TZ"] = "UTC"  # Spark hands timestamps to Python in the process's zone
    time.tzset()
    spark = session(settings, app="changelake-tests")
    yield spark
    spark.stop()


@dataclass
class Pipeline:
    """A captured set of source tables and the changelake pipeline deriving them."""

    settings: Settings
    dsn: str
    spark: SparkSession
    home: Path
    prefix: str = ""
    tables: list[str] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "CHANGELAKE_LAKE": str(self.home / "lake"),
            "CHANGELAKE_CHECKPOINTS": str(self.home / "checkpoints"),
            "CHANGELAKE_CONNECTORS_DIR": str(self.home / "connectors"),
            "CHANGELAKE_LAKE_CONFIG": str(self.home / "lake.json"),
            "CHANGELAKE_SEARCH_CONFIG": str(self.home / "search.json"),
            "CHANGELAKE_VIEWS_CONFIG": str(self.home / "views.json"),
        }

    def alias(self, table: str) -> str:
        return f"{self.prefix}.public.{table}".lower()

    def path(self, table: str) -> str:
        return f"{self.home / 'lake'}/{self.prefix}/public/{table}"

    def sql(self, statement: str, params: Any = None) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(statement, params)

    def caught_up(self) -> None:
        configs = [json.loads(f.read_text())["config"] for f in self.home.glob("connectors/*")]
        (config,) = (c for c in configs if c["slot.name"] == self.prefix)
        wait_caught_up(source_of(self.settings, config), self.prefix, timeout_s=90)

    def run_once(
        self, *args: str, check: bool = True, env_extra: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        self.caught_up()
        return self.cli("run", "--once", *args, check=check, env_extra=env_extra)

    def cli(
        self, *args: str, check: bool = True, env_extra: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """This pipeline's command, in-process on the suite's Spark session."""
        return changelake_here(*args, check=check, env={**self.env, **(env_extra or {})})

    def start(
        self, *args: str, fault: str | None = None, env_extra: dict[str, str] | None = None
    ) -> subprocess.Popen[str]:
        env = {**self.env, **(env_extra or {})}
        if fault:
            env["CHANGELAKE_FAULT_PAUSE"] = fault
        return subprocess.Popen(
            [*CLI, "run", *args],
            cwd=ROOT,
            env=env,
            text=True,
            start_new_session=True,
            preexec_fn=dies_with_the_suite,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

    def kill_when_paused(self, proc: subprocess.Popen[str], point: str, table: str) -> None:
        marker = self.settings.run_dir / f"paused-{point}-{table}"
        marker.unlink(missing_ok=True)
        wait_for(lambda: marker.exists() or proc.poll() is not None, 300, f"pause at {point}")
        assert proc.poll() is None, f"the pipeline exited before {point}:\n{proc.communicate()[0]}"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        marker.unlink(missing_ok=True)

    def assert_equal(self, table: str, key: list[str], **kw: Any) -> int:
        return assert_same(self.spark, self.dsn, f"public.{table}", self.path(table), key, **kw)

    def assert_equal_outside_spark(self, table: str, key: list[str], soft: bool = False) -> None:
        """What Polars and deltalake read of the table (its deletion vectors applied) equals
        the source."""
        path = self.path(table)
        frame = pl.read_delta(path)
        rows = {"polars": frame.to_dicts(), "delta-rs": delta_rs_rows(path)}
        if soft:
            rows = {k: [r for r in v if not r["_cdc_deleted"]] for k, v in rows.items()}
        assert_read_outside_spark(self.dsn, f"public.{table}", key, rows, text_columns(frame))

    def wait_equal(self, table: str, key: list[str], timeout_s: float = 180) -> int:
        """For a streaming run: wait until the derived table equals the source."""
        last: list[str] = []

        def equal() -> int | None:
            try:
                return self.assert_equal(table, key) or -1
            except Exception as exc:  # not there yet, or still converging
                last[:] = [str(exc)[:2000]]
                return None

        try:
            return int(wait_for(equal, timeout_s, f"{table} to equal its source"))
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last difference:\n{last[0] if last else '-'}") from None


@pytest.fixture
def pipeline(
    settings: Settings,
    admin_dsn: str,
    spark: SparkSession,
    capture: Callable[..., str],
    tmp_path: Path,
) -> Iterator[Callable[..., Pipeline]]:
    """`pipeline(tables, ddl)` runs the DDL (and seed rows), then captures those tables."""
    made: list[Pipeline] = []

    def make(
        tables: list[str],
        ddl: list[str],
        soft_delete: tuple[str, ...] = (),
        search: dict[str, dict[str, str]] | None = None,
        connector: dict[str, str] | None = None,
        views: dict[str, dict[str, str]] | None = None,
    ) -> Pipeline:
        p = Pipeline(settings, admin_dsn, spark, tmp_path, tables=tables)
        made.append(p)
        for statement in ddl:
            p.sql(statement)
        lake = {"soft_delete": list(soft_delete)}
        (tmp_path / "lake.json").write_text(json.dumps(lake))
        indexes = {t: {"fields": fields} for t, fields in (search or {}).items()}
        (tmp_path / "search.json").write_text(json.dumps({"indexes": indexes}))
        (tmp_path / "views.json").write_text(json.dumps({"views": views or {}}))
        p.prefix = capture(",".join([*(f"public.{t}" for t in tables), SIGNAL_TABLE]), connector)
        return p

    yield make
    for p in made:
        for t in p.tables:
            p.sql(f"DROP TABLE IF EXISTS public.{t}")
