"""Compare a derived Delta table with its Postgres source, row by row and column by column."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal
from typing import Any

import psycopg
from pyspark.sql import SparkSession

META = {"_cdc_lsn", "_cdc_op", "_cdc_source_ts", "_cdc_deleted", "_cdc_deleted_at"}


def canonical(value: Any) -> Any:
    """One comparable form for what psycopg and Spark each return."""
    if isinstance(value, Decimal):
        return ("decimal", str(value))
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return ("ts", value.isoformat())
    if isinstance(value, bytes | bytearray | memoryview):
        return ("bytes", bytes(value))
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return ("json", json.dumps(value, sort_keys=True))
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    return value


def pg_rows(
    dsn: str, table: str, key: list[str], json_columns: set[str]
) -> dict[Any, dict[str, Any]]:
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {table}")
        names = [d.name for d in cur.description or []]
        rows = cur.fetchall()
    out = {}
    for row in rows:
        rec = dict(zip(names, row, strict=True))
        for c in json_columns:
            if rec.get(c) is not None:
                rec[c] = ("json", json.dumps(rec[c], sort_keys=True))
        out[tuple(rec[k] for k in key)] = {
            k: canonical(v) if k not in json_columns else v for k, v in rec.items()
        }
    return out


def delta_rows(
    spark: SparkSession, path: str, key: list[str], json_columns: set[str], soft: bool = False
) -> dict[Any, dict[str, Any]]:
    frame = spark.read.format("delta").load(path)
    if soft:
        frame = frame.where("NOT _cdc_deleted")
    out = {}
    for row in frame.collect():
        rec = {k: v for k, v in row.asDict().items() if k not in META}
        for c in json_columns:
            if rec.get(c) is not None:
                rec[c] = ("json", json.dumps(json.loads(rec[c]), sort_keys=True))
        out[tuple(rec[k] for k in key)] = {
            k: canonical(v) if k not in json_columns else v for k, v in rec.items()
        }
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
    source = pg_rows(dsn, table, key, set(json_columns))
    derived = delta_rows(spark, path, key, set(json_columns), soft)
    problems = differences(source, derived)
    assert not problems, f"{table}: {len(problems)} differences, first ones:\n" + "\n".join(
        problems[:15]
    )
    return len(source)
