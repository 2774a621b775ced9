"""Asking Debezium to re-send rows through the log: an `execute-snapshot` signal (an incremental
snapshot) whose additional condition per table selects just the given keys, written into the
connector's signal table. Debezium reads them in chunks between watermarks, so a row changed while
it is read is sent from the change, not the read; the pipeline's LSN guard applies the re-sent
rows like any other change. `verify --repair` and the pipeline's key-change check use it."""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from pipelines import pg
from pipelines.exceptions import ChangelakeError
from pipelines.read.verify.ranges import Key, KeyColumn, ordered_key
from pipelines.tables import TableRef

SIGNAL_DATA_MAX = 2048  # the signal table's data column: varchar(2048) (schemas/changelake.sql)
MOST_SPANS = 64  # key runs per table: a few scattered keys each re-send just themselves


@dataclass(frozen=True)
class Request:
    """What to re-send of one table: its key columns and the keys."""

    ref: TableRef
    key: list[KeyColumn]
    keys: list[Key]


def spans(key: Sequence[KeyColumn], keys: Sequence[Key], count: int) -> list[tuple[Key, Key]]:
    """The keys in the source's order, cut into at most `count` runs: (first, last) of each.
    Text keys sort byte-wise, as `COLLATE "C"` does (and verify's key ranges)."""

    def order(k: Key) -> tuple[Any, ...]:
        return tuple(str(v).encode() if c.text else v for c, v in zip(key, k, strict=True))

    ordered = sorted(set(keys), key=order)
    size = max(1, math.ceil(len(ordered) / max(1, count)))
    runs = [ordered[i : i + size] for i in range(0, len(ordered), size)]
    return [(run[0], run[-1]) for run in runs]


def condition(key: Sequence[KeyColumn], runs: Sequence[tuple[Key, Key]]) -> sql.Composed:
    """A WHERE fragment selecting the runs' keys (bounds included), parenthesised: Debezium
    appends it to its chunk query as it is."""
    row = sql.SQL("({})").format(ordered_key(key))

    def literal(values: Key) -> sql.Composed:
        return sql.SQL("({})").format(
            sql.SQL(", ").join(
                sql.Literal(str(v) if c.text else v) for c, v in zip(key, values, strict=True)
            )
        )

    parts = [
        sql.SQL("{} = {}").format(row, literal(lo))
        if lo == hi
        else sql.SQL("({} >= {} AND {} <= {})").format(row, literal(lo), row, literal(hi))
        for lo, hi in runs
    ]
    return sql.SQL("({})").format(sql.SQL(" OR ").join(parts))


def signal_data(conn: psycopg.Connection[Any], requests: Sequence[Request]) -> str:
    """The signal's JSON: every table with its condition, as many key runs as fit the column."""
    count = MOST_SPANS
    while True:
        conditions = [
            {
                "data-collection": f"{r.ref.schema}.{r.ref.table}",
                "filter": condition(r.key, spans(r.key, r.keys, count)).as_string(conn),
            }
            for r in requests
        ]
        data = json.dumps(
            {
                "data-collections": [c["data-collection"] for c in conditions],
                "type": "incremental",
                "additional-conditions": conditions,
            }
        )
        if len(data) <= SIGNAL_DATA_MAX or count == 1:
            return data
        count //= 2  # fewer, wider runs: more rows re-sent, all of them still right


def send(dsn: str, signal_table: str, requests: Sequence[Request]) -> str:
    """Write one `execute-snapshot` signal for a connector's tables; returns its id."""
    schema, _, table = signal_table.rpartition(".")
    signal_id = str(uuid.uuid4())
    with pg.connect(dsn, autocommit=True) as conn:
        data = signal_data(conn, requests)
        if len(data) > SIGNAL_DATA_MAX:
            raise ChangelakeError(
                f"re-send: the keys of {', '.join(r.ref.name for r in requests)} do not "
                f"fit one signal ({len(data):,} of {SIGNAL_DATA_MAX:,} characters)",
                "re-send fewer tables at once (`changelake verify --repair TABLE`)",
            )
        conn.execute(
            sql.SQL("INSERT INTO {} (id, type, data) VALUES (%s, 'execute-snapshot', %s)").format(
                sql.Identifier(schema or "public", table)
            ),
            (signal_id, data),
        )
    return signal_id
