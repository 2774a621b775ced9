"""Read one key range from each side, as {key: {column: comparable value}}.

Source: Postgres through a server-side cursor. Lake: the Delta table filtered to the range (live
rows only). Index: the documents for the source's keys, fetched by id. Only one range is in
memory at a time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.string import TextLoader
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from changelake import pg
from changelake.search.client import SearchClient
from changelake.verify.canonical import (
    Float4Loader,
    MoneyLoader,
    as_json,
    as_number,
    canonical,
    document_value,
)
from changelake.verify.ranges import Key, KeyColumn, KeyRange, lake_filter, source_filter

Rows = dict[Key, dict[str, Any]]
LAKE_ONLY = {"_cdc_lsn", "_cdc_op", "_cdc_source_ts", "_cdc_deleted", "_cdc_deleted_at"}
LAKE_ONLY |= {"_kafka_partition", "_kafka_offset"}  # an event table's
_XMIN = "_changelake_xmin"  # a source row's version, when asked for


def connect(dsn: str) -> psycopg.Connection[Any]:
    conn = pg.connect(dsn)
    conn.adapters.register_loader("float4", Float4Loader)
    conn.execute("SET lc_monetary TO 'C'")  # the format MoneyLoader reads
    conn.commit()
    conn.adapters.register_loader("money", MoneyLoader)
    for name in ("json", "jsonb"):  # the text, as Debezium sends it
        conn.adapters.register_loader(name, TextLoader)
    return conn


def key_of(row: dict[str, Any], key: Sequence[KeyColumn]) -> Key:
    return tuple(str(row[k.name]) if k.text else canonical(row[k.name]) for k in key)


class Comparable:
    """How each column is compared: JSON by value, a numeric kept as text by value."""

    def __init__(self, json_columns: set[str], numeric_text: set[str]) -> None:
        self.json_columns, self.numeric_text = json_columns, numeric_text

    def row(self, rec: dict[str, Any]) -> dict[str, Any]:
        return {c: self.value(c, v) for c, v in rec.items()}

    def value(self, column: str, value: Any) -> Any:
        if column in self.json_columns:
            return as_json(value)
        if column in self.numeric_text:
            return as_number(value)
        return canonical(value)


def columns_sql(columns: Sequence[str] | None) -> sql.Composable:
    """The select list: `columns` (those the connector captures), or every column (None)."""
    return sql.SQL("*") if columns is None else sql.SQL(", ").join(map(sql.Identifier, columns))


def source_range(
    conn: psycopg.Connection[Any],
    table: sql.Composable,
    key: Sequence[KeyColumn],
    part: KeyRange,
    columns: Sequence[str] | None = None,
    versions: dict[Key, str] | None = None,
) -> Rows:
    """The range's rows as psycopg gives them (each side canonicalizes its own way).
    `versions`: filled with each row's version (its `xmin`), read in the same snapshot."""
    where, params = source_filter(key, part)
    version = sql.SQL("xmin::text AS {}, ").format(sql.Identifier(_XMIN))
    query = sql.SQL("SELECT {}{} FROM {} WHERE {}").format(
        version if versions is not None else sql.SQL(""), columns_sql(columns), table, where
    )
    out: Rows = {}
    with conn.cursor(name="changelake_verify") as cur:  # server-side: streamed, not all at once
        cur.itersize = 5000
        cur.execute(query, params)
        names: list[str] = []
        for row in cur:
            names = names or [d.name for d in cur.description or []]
            rec = dict(zip(names, row, strict=True))
            ident = key_of(rec, key)
            if versions is not None:
                versions[ident] = str(rec.pop(_XMIN))
            out[ident] = rec
    return out


def lake_frame(frame: DataFrame, soft_delete: bool) -> DataFrame:
    """The live rows, source columns only. PySpark turns a TIMESTAMP into Python through the
    local clock, which fails for year 1; the session is UTC, so TIMESTAMP_NTZ is that instant."""
    if soft_delete:
        frame = frame.where(~F.col("_cdc_deleted"))
    return frame.select(
        *(
            F.col(f.name).cast(T.TimestampNTZType()).alias(f.name)
            if isinstance(f.dataType, T.TimestampType)
            else F.col(f.name)
            for f in frame.schema.fields
            if f.name not in LAKE_ONLY
        )
    )


def lake_range(frame: DataFrame, key: Sequence[KeyColumn], part: KeyRange, how: Comparable) -> Rows:
    out: Rows = {}
    duplicates: list[Key] = []
    types = {f.name: f.dataType for f in frame.schema.fields}
    # Arrow, not Rows: a step's rows reach Python in columnar batches, about half the time of
    # unpickling and converting each Row (the step's largest cost after comparing).
    got = frame.where(lake_filter(key, part, types)).toArrow()
    # Batch by batch: one range's rows as Python values at most once, beside its Arrow form.
    records = (r for b in got.to_batches() for r in b.to_pylist(maps_as_pydicts="strict"))
    for rec in records:
        ident = key_of(rec, key)
        if ident in out:
            duplicates.append(ident)
        out[ident] = how.row(rec)
    for ident in duplicates:  # a key twice in the lake is a difference, never hidden
        out[ident] = {"<duplicate key>": True}
    return out


def index_range(
    client: SearchClient,
    alias: str,
    ids: dict[str, Key],
    fields: Sequence[str],
) -> Rows:
    """The documents with these ids (doc id → source key), declared fields only."""
    out: Rows = {}
    wanted = list(ids)
    for start in range(0, len(wanted), 1000):
        chunk = wanted[start : start + 1000]
        body = {"ids": chunk}
        found = client.request("POST", f"/{alias}/_mget?_source_includes={','.join(fields)}", body)
        for doc in found["docs"]:
            if doc.get("found"):
                source = doc["_source"]
                out[ids[doc["_id"]]] = {f: document_value(source.get(f)) for f in fields}
    return out


def doc_id(values: Sequence[Any]) -> str:
    """The id changelake gives a row's document (see changelake/search/documents.py)."""
    if len(values) == 1:
        return str(values[0])
    return json.dumps([str(v) for v in values], separators=(",", ":"), ensure_ascii=False)
