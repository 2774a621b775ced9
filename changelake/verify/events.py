"""Verify an append-only event table (a table captured without a key, see
capture/topic_groups.py): its events since the last truncate, replayed as a multiset of rows
(each insert or snapshot read adds its row, each delete takes its old row away), must be the
source's rows, each as often as the source holds it.

An update's event holds its new row only, so the rows it replaced cannot be taken away: a table
whose events since the last truncate include updates is compared by its number of rows, and the
report says so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from changelake.changelog.decode import LSN, OP
from changelake.verify.diff import Differences
from changelake.verify.sides import Comparable, columns_sql, lake_frame

_OP = "_verify_op"  # the event's op, under a name lake_frame keeps


def _row(rec: dict[str, Any], how: Comparable) -> str:
    return repr(sorted(how.row(rec).items()))


def source_rows(
    conn: psycopg.Connection[Any],
    table: sql.Composable,
    how: Comparable,
    columns: Sequence[str] | None = None,
) -> Counter[str]:
    rows: Counter[str] = Counter()
    with conn.cursor(name="changelake_verify_events") as cur:  # streamed, not all at once
        cur.itersize = 5000
        cur.execute(sql.SQL("SELECT {} FROM {}").format(columns_sql(columns), table))
        names: list[str] = []
        for row in cur:
            names = names or [d.name for d in cur.description or []]
            rows[_row(dict(zip(names, row, strict=True)), how)] += 1
    return rows


def since_truncate(events: DataFrame) -> DataFrame:
    """The events after the newest truncate (all of them when there is none)."""
    last = events.where(F.col(OP) == "t").agg(F.max(LSN)).first()
    if last is None or last[0] is None:
        return events
    return events.where(F.col(LSN) > F.lit(last[0]))


def compare(source: Counter[str], events: DataFrame, how: Comparable, into: Differences) -> None:
    """`events`: the event table's rows as read; adds what differs to `into`."""
    live = since_truncate(events).where(F.col(OP) != "t")
    ops = {op: int(n) for op, n in live.groupBy(OP).count().collect()}
    if ops.get("u"):
        into.samples.append(
            f"{ops['u']:,} updates since the last truncate: an event keeps the new row only, so "
            "the table is compared by its number of rows"
        )
        rows = ops.get("c", 0) + ops.get("r", 0) - ops.get("d", 0)
        counted = Counter({"<row>": sum(source.values())})
        into.add(_numbered(counted), _numbered(Counter({"<row>": rows})))
        into.resend.clear()  # events are not re-sent: a resend would append them again
        return
    replayed: Counter[str] = Counter()
    for row in lake_frame(live.withColumn(_OP, F.col(OP)), False).toLocalIterator():
        rec = row.asDict()
        sign = -1 if rec.pop(_OP) == "d" else 1
        replayed[_row(rec, how)] += sign
    into.add(_numbered(source), _numbered(replayed))
    into.resend.clear()  # events are not re-sent: a resend would append them again


def _numbered(rows: Counter[str]) -> dict[tuple[str, int], dict[str, Any]]:
    """A multiset as distinct keys: each row once per time it is there (a row deleted more often
    than it was inserted, a count below zero, as keys no source row has)."""
    return {(row, i if n > 0 else -1 - i): {} for row, n in rows.items() for i in range(abs(n))}
