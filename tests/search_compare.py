"""Compare a search index with its Postgres source: every document, every declared field."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import psycopg

from changelake.search.client import SearchClient
from changelake.verify.canonical import document_value
from changelake.verify.sides import doc_id

__all__ = ["differences", "doc_id", "documents"]


def documents(client: SearchClient, alias: str) -> dict[str, dict[str, Any]]:
    """Every document behind the alias, by id (test indexes are small: one page)."""
    client.request("POST", f"/{alias}/_refresh")
    found = client.request(
        "POST", f"/{alias}/_search", {"size": 10_000, "query": {"match_all": {}}}
    )
    return {h["_id"]: h["_source"] for h in found["hits"]["hits"]}


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
            if document_value(value) != document_value(have[k].get(column)):
                found.append(
                    f"document {k}: {column}: source {value!r}, index {have[k].get(column)!r}"
                )
    return found[:20]
