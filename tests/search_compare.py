"""Compare a search index with its Postgres source: every document, every declared field."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Collection, Sequence
from decimal import Decimal
from typing import Any

import psycopg

from pipelines.search.client import SearchClient


def documents(client: SearchClient, alias: str) -> dict[str, dict[str, Any]]:
    """Every document behind the alias, by id (test indexes are small: one page)."""
    client.request("POST", f"/{alias}/_refresh")
    found = client.request(
        "POST", f"/{alias}/_search", {"size": 10_000, "query": {"match_all": {}}}
    )
    return {h["_id"]: h["_source"] for h in found["hits"]["hits"]}


def doc_id(values: Sequence[Any]) -> str:
    """The id changelake gives a row: the key itself, or a JSON array of its values as text."""
    if len(values) == 1:
        return str(values[0])
    return json.dumps([str(v) for v in values], separators=(",", ":"), ensure_ascii=False)


def _same(value: Any) -> Any:
    """One comparable form for psycopg's values and a document's JSON values."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, Decimal, float)):
        return ("number", Decimal(str(value)))
    if isinstance(value, dt.datetime):
        return ("time", value.astimezone(dt.UTC))
    if isinstance(value, dt.date):
        return ("time", dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC))
    if isinstance(value, list):
        return [_same(v) for v in value]
    if isinstance(value, str) and len(value) >= 20 and value[4] == "-" and value[10] == "T":
        return ("time", dt.datetime.fromisoformat(value).astimezone(dt.UTC))
    return value


def expected(
    dsn: str, table: str, key: Sequence[str], fields: Sequence[str]
) -> dict[str, dict[str, Any]]:
    columns = ", ".join([*key, *(f for f in fields if f not in key)])
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(f"SELECT {columns} FROM {table}").fetchall()
    names = [*key, *(f for f in fields if f not in key)]
    return {doc_id(row[: len(key)]): dict(zip(names, row, strict=True)) for row in rows}


def differences(
    client: SearchClient,
    alias: str,
    dsn: str,
    table: str,
    key: Sequence[str],
    fields: Sequence[str],
    skip: Collection[str] = (),
) -> list[str]:
    """What differs between source and index (empty when equal), ignoring ids in `skip`."""
    want = {k: v for k, v in expected(dsn, table, key, fields).items() if k not in skip}
    have = {k: v for k, v in documents(client, alias).items() if k not in skip}
    found = [f"missing document {k}" for k in sorted(set(want) - set(have))]
    found += [f"extra document {k}" for k in sorted(set(have) - set(want))]
    for k in sorted(set(want) & set(have)):
        if "_cdc_lsn" not in have[k]:
            found.append(f"document {k} has no _cdc_lsn")
        for column, value in want[k].items():
            if _same(value) != _same(have[k].get(column)):
                found.append(
                    f"document {k}: {column}: source {value!r}, index {have[k].get(column)!r}"
                )
    return found[:20]
