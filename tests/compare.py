"""Compare a derived Delta table with its Postgres source, row by row and column by column."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from typing import Any

import polars as pl
import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from changelake.lake.table import read_table
from changelake.verify.canonical import as_number, canonical
from changelake.verify.sides import connect

META = {"_cdc_lsn", "_cdc_op", "_cdc_source_ts", "_cdc_deleted", "_cdc_deleted_at"}


def pg_rows(
    dsn: str,
    table: str,
    key: list[str],
    json_columns: set[str],
    numbers: Collection[str] = (),
) -> dict[Any, dict[str, Any]]:
    with connect(dsn) as conn:  # as `verify` reads: JSON as text, real as float4, money exact
        cur = conn.execute(f"SELECT * FROM {table}")
        names = [d.name for d in cur.description or []]
        rows = cur.fetchall()
    out: dict[Any, dict[str, Any]] = {}
    for row in rows:
        _add(out, dict(zip(names, row, strict=True)), key, json_columns, numbers, table)
    return out


def _add(
    out: dict[Any, dict[str, Any]],
    rec: dict[str, Any],
    key: list[str],
    json_columns: set[str],
    numbers: Collection[str],
    where: str,
) -> None:
    """One row, in comparable form, under its key (a key seen twice is a failure)."""
    ident = tuple(rec[k] for k in key)
    assert ident not in out, f"duplicate key {rec} in {where}"
    for c in json_columns:
        if rec.get(c) is not None:
            rec[c] = ("json", json.dumps(json.loads(rec[c]), sort_keys=True))
    out[ident] = {k: _compared(k, v, json_columns, numbers) for k, v in rec.items()}


def _compared(column: str, value: Any, json_columns: set[str], numbers: Collection[str]) -> Any:
    if column in json_columns:
        return value
    if column in numbers:
        return as_number(value)
    return canonical(value)


def pg_numeric_columns(dsn: str, table: str) -> set[str]:
    schema, _, name = table.rpartition(".")
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = %s AND table_name = %s AND data_type = 'numeric'",
            (schema or "public", name),
        ).fetchall()
    return {r[0] for r in rows}


def delta_text_columns(spark: SparkSession, path: str) -> set[str]:
    schema = read_table(spark, path).rows.schema
    return {f.name for f in schema.fields if isinstance(f.dataType, T.StringType)}


def delta_rows(
    spark: SparkSession,
    path: str,
    key: list[str],
    json_columns: set[str],
    soft: bool = False,
    numbers: Collection[str] = (),
) -> dict[Any, dict[str, Any]]:
    frame = read_table(spark, path, soft).rows  # as every reader sees it
    if soft:
        frame = frame.where("NOT _cdc_deleted")
    # PySpark turns a TIMESTAMP into Python through the local clock, which fails for 0001-01-01;
    # the session's zone is UTC, so its wall clock (TIMESTAMP_NTZ) is the same instant.
    frame = frame.select(
        *(
            F.col(f.name).cast(T.TimestampNTZType()).alias(f.name)
            if isinstance(f.dataType, T.TimestampType)
            else F.col(f.name)
            for f in frame.schema.fields
        )
    )
    return keyed((row.asDict() for row in frame.collect()), key, json_columns, numbers, path)


def keyed(
    records: Iterable[dict[str, Any]],
    key: list[str],
    json_columns: set[str],
    numbers: Collection[str],
    where: str,
) -> dict[Any, dict[str, Any]]:
    """A derived table's rows, however read, in the form `pg_rows` gives the source's."""
    out: dict[Any, dict[str, Any]] = {}
    for record in records:
        rec = {k: v for k, v in record.items() if k not in META}
        _add(out, rec, key, json_columns, numbers, where)
    return out


def differences(source: dict[Any, dict[str, Any]], derived: dict[Any, dict[str, Any]]) -> list[str]:
    problems = [f"missing key {k}" for k in sorted(source.keys() - derived.keys(), key=str)]
    problems += [f"extra key {k}" for k in sorted(derived.keys() - source.keys(), key=str)]
    for k in sorted(source.keys() & derived.keys(), key=str):
        for col, want in source[k].items():
            got = derived[k].get(col, "<no column>")
            if got != want:
                problems.append(f"key {k} column {col}: source {want!r:.120} derived {got!r:.120}")
    return problems


def assert_same(
    spark: SparkSession,
    dsn: str,
    table: str,
    path: str,
    key: list[str],
    json_columns: set[str] = frozenset(),  # type: ignore[assignment]
    soft: bool = False,
) -> int:
    numbers = pg_numeric_columns(dsn, table) & delta_text_columns(spark, path)
    source = pg_rows(dsn, table, key, set(json_columns), numbers)
    derived = delta_rows(spark, path, key, set(json_columns), soft, numbers)
    problems = differences(source, derived)
    assert not problems, f"{table}: {len(problems)} differences, first ones:\n" + "\n".join(
        problems[:15]
    )
    return len(source)


def assert_read_outside_spark(
    dsn: str,
    table: str,
    key: list[str],
    readers: dict[str, list[dict[str, Any]]],
    text: set[str],
    json_columns: set[str] = frozenset(),  # type: ignore[assignment]
) -> None:
    """Rows a reader without Spark got (per reader), equal to the source row by row. `text`:
    the columns it read as strings (an unconstrained numeric is exact text in the lake)."""
    numbers = pg_numeric_columns(dsn, table) & text
    source = pg_rows(dsn, table, key, set(json_columns), numbers)
    for reader, rows in readers.items():
        derived = keyed(rows, key, set(json_columns), numbers, f"{reader}: {table}")
        problems = differences(source, derived)
        assert not problems, f"{reader}, {table}: " + "\n".join(problems[:10])


def delta_rs_rows(path: str) -> list[dict[str, Any]]:
    """A Delta table's rows as deltalake (delta-rs) reads a table with deletion vectors: through
    its QueryBuilder (its to_pyarrow_table refuses such a table, docs/readers.md)."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    found = QueryBuilder().register("t", DeltaTable(path)).execute("SELECT * FROM t")
    rows: list[dict[str, Any]] = pa.table(found.read_all()).to_pylist()
    return rows


def text_columns(frame: pl.DataFrame) -> set[str]:
    return {name for name, kind in frame.schema.items() if kind == pl.String}
