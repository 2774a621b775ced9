"""Readers that know nothing of changelake (Polars, DuckDB, delta-rs, a plain Spark read of the
Delta table) see each base table equal to its source, row by row, as a streaming run writes it:
after inserts, updates, deletes (deletion vectors), a key change and a truncate, and with
nothing following the last change."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import duckdb_extension_delta
import polars as pl
import pytest

from tests.compare import assert_read_outside_spark, delta_rs_rows, text_columns
from tests.integration.pipeline_fixtures import Pipeline
from tests.support import wait_for

pytestmark = pytest.mark.stack

WAIT_S = 300  # for every reader to see the last change (seconds, here; minutes on a busy machine)


def duckdb_rows(path: str) -> list[dict[str, Any]]:
    """DuckDB's delta extension as the PyPI package ships it: installed from its own file."""
    folder = Path(duckdb_extension_delta.__file__).parent / "extensions" / f"v{duckdb.__version__}"
    with duckdb.connect() as con:
        con.execute(f"INSTALL '{folder / 'delta.duckdb_extension'}'")
        con.execute("LOAD delta")
        cursor = con.execute(f"SELECT * FROM delta_scan('{path}')")
        names = [d[0] for d in cursor.description or []]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def outside_reads(p: Pipeline, table: str) -> tuple[dict[str, list[dict[str, Any]]], set[str]]:
    path = p.path(table)
    frame = pl.read_delta(path)
    readers = {
        "polars": frame.to_dicts(),
        "duckdb": duckdb_rows(path),
        "delta-rs": delta_rs_rows(path),
        "plain spark": [r.asDict() for r in p.spark.read.format("delta").load(path).collect()],
    }
    return readers, text_columns(frame)


def test_outside_readers_see_the_base_table_current_also_when_the_source_goes_quiet(
    pipeline: Callable[..., Pipeline], unique: str
) -> None:
    t = f"outside_{unique}"
    p = pipeline(
        [t],
        [
            f"CREATE TABLE public.{t} (id int PRIMARY KEY, name text, amount numeric(12,2))",
            f"INSERT INTO public.{t} SELECT i, 'seed', i * 1.25 FROM generate_series(1, 200) i",
        ],
    )
    p.caught_up()
    p.run_once()  # the snapshot
    proc = p.start()
    try:
        p.sql(f"INSERT INTO public.{t} SELECT i, 'new', i FROM generate_series(201, 260) i")
        p.sql(f"UPDATE public.{t} SET amount = amount + 1, name = name || '+' WHERE id % 3 = 0")
        p.sql(f"DELETE FROM public.{t} WHERE id % 7 = 0")
        p.sql(f"UPDATE public.{t} SET id = id + 1000 WHERE id = 5")  # a key change
        p.sql(f"TRUNCATE public.{t}")
        p.sql(f"INSERT INTO public.{t} SELECT i, 'after', i * 2 FROM generate_series(1, 120) i")
        p.sql(f"UPDATE public.{t} SET name = 'last' WHERE id % 10 = 1")
        p.sql(f"DELETE FROM public.{t} WHERE id > 110")
        last: list[str] = []

        def every_reader_equal() -> bool:
            assert proc.poll() is None, proc.communicate()[0]
            try:
                readers, text = outside_reads(p, t)
                assert_read_outside_spark(p.dsn, f"public.{t}", ["id"], readers, text)
            except AssertionError as exc:
                last[:] = [str(exc)[:1500]]
                return False
            return True

        try:
            wait_for(every_reader_equal, WAIT_S, "every outside reader to see the source")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last difference: {last[0] if last else '-'}") from None
    finally:
        proc.terminate()
        proc.communicate(timeout=120)
    # What they read holds deletion vectors: the deletes and updates marked rows, not files.
    assert "deletionVector" in "".join(
        f.read_text() for f in Path(p.path(t), "_delta_log").glob("*.json")
    )
