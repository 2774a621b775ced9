"""`changelake verify [TABLE…] [--json]`: wait until everything committed so far is applied, then
compare each table's source rows with its Delta table and its index, key range by key range."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from changelake import progress
from changelake.apply.pipeline_file import pipeline_state
from changelake.capture.source import source_of
from changelake.lake.layout import delta_exists
from changelake.lake.table import read_table
from changelake.search.client import SearchClient
from changelake.settings import Settings
from changelake.sinks.search import SearchSink
from changelake.tables import TableRef
from changelake.verify import events
from changelake.verify.diff import Differences
from changelake.verify.ranges import TEXT_TYPES, Key, KeyColumn, boundaries_query, ranges
from changelake.verify.sides import (
    Comparable,
    connect,
    doc_id,
    index_range,
    lake_frame,
    lake_range,
    source_range,
)
from changelake.verify.wait import wait_applied
from changelake.views.checks import check_view
from changelake.views.derived import derived_views

STEP = 50_000  # source rows per key range: what is in memory at once, per side
PROGRESS_EVERY_S = 10.0
Out = Callable[[str], None]


@dataclass
class TableCheck:
    table: str
    delta: Differences
    index: Differences | None
    key: list[KeyColumn] = field(default_factory=list)
    # The running pipeline stopped the table (its state and error): not compared, not equal.
    stopped: str | None = None

    @property
    def resend(self) -> list[Key]:
        """Every key the table or its index lacks or holds otherwise, once."""
        keys = dict.fromkeys(self.delta.resend)
        keys.update(dict.fromkeys(self.index.resend if self.index else ()))
        return list(keys)

    @property
    def equal(self) -> bool:
        return (
            self.stopped is None and self.delta.equal and (self.index is None or self.index.equal)
        )

    def as_dict(self) -> dict[str, Any]:
        def part(d: Differences | None) -> dict[str, Any] | None:
            if d is None:
                return None
            return {k: v for k, v in d.__dict__.items() if k != "resend"} | {"equal": d.equal}

        return {
            "table": self.table,
            "equal": self.equal,
            "stopped": self.stopped,
            "delta": part(self.delta),
            "index": part(self.index),
        }


def verify(
    settings: Settings,
    spark: SparkSession,
    refs: list[TableRef],
    out: Out,
    timeout_s: float = 300.0,
    step: int = STEP,
) -> list[TableCheck]:
    stopped = wait_applied(settings, spark, refs, timeout_s, out)
    client = SearchClient.of(settings, retry_for_s=30)
    checks = {
        n: TableCheck(n, Differences("delta"), None, stopped=why) for n, why in stopped.items()
    }
    for source in {r.source for r in refs}:  # each connector's own source database
        with connect(source_of(settings, dict(source)).dsn()) as conn:
            for ref in (r for r in refs if r.source == source and r.name not in stopped):
                checks[ref.name] = _check(settings, spark, conn, client, ref, step, out)
    running = pipeline_state(settings)[0]
    views = [
        TableCheck(v.name, check_view(spark, v, timeout_s, running), None)
        for v in derived_views(settings, refs)
    ]
    return [checks[r.name] for r in refs] + views


def source_columns(conn: psycopg.Connection[Any], ref: TableRef) -> dict[str, str]:
    rows = conn.execute(
        "SELECT column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = %s AND table_name = %s",
        (ref.schema, ref.table),
    ).fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


def _check(
    settings: Settings,
    spark: SparkSession,
    conn: psycopg.Connection[Any],
    client: SearchClient,
    ref: TableRef,
    step: int,
    out: Out,
) -> TableCheck:
    read = None
    if delta_exists(spark, ref.path(settings.lake)):
        read = read_table(spark, ref.path(settings.lake), ref.soft_delete)
    meta = read.meta if read is not None else None
    types = source_columns(conn, ref)
    key = [KeyColumn(k, types.get(k, "") in TEXT_TYPES) for k in (meta.key if meta else ())]
    check = TableCheck(
        ref.name, Differences("delta"), Differences("index") if ref.search else None, key
    )
    if ref.events and read is not None:
        how = comparable(types, read.rows)
        rows = events.source_rows(conn, table_sql(ref), how, captured_columns(types, ref))
        events.compare(rows, read.rows, how, check.delta)
        return check
    if meta is None or not key:
        check.delta.samples.append("no Delta table (or no key recorded): nothing to compare")
        check.delta.missing = _count(conn, ref)
        return check
    assert read is not None
    frame = lake_frame(read.rows, ref.soft_delete).persist()
    try:
        _compare(conn, client, ref, frame, key, types, check, step, out)
    finally:
        frame.unpersist()
    return check


def _count(conn: psycopg.Connection[Any], ref: TableRef) -> int:
    row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table_sql(ref))).fetchone()
    return int(row[0]) if row else 0


def table_sql(ref: TableRef) -> sql.Composed:
    return sql.SQL("{}.{}").format(sql.Identifier(ref.schema), sql.Identifier(ref.table))


def captured_columns(types: dict[str, str], ref: TableRef) -> list[str] | None:
    """The source columns the connector captures (None: all of them)."""
    if not ref.excluded:
        return None
    return [c for c in types if ref.captures(c)]


def comparable(types: dict[str, str], frame: DataFrame) -> Comparable:
    """JSON compared by value; a numeric the lake keeps as text (beyond decimal's digits) too."""
    text_columns = {f.name for f in frame.schema.fields if isinstance(f.dataType, T.StringType)}
    return Comparable(
        {c for c, t in types.items() if t in ("json", "jsonb")},
        {c for c, t in types.items() if t == "numeric"} & text_columns,
    )


def _compare(
    conn: psycopg.Connection[Any],
    client: SearchClient,
    ref: TableRef,
    frame: Any,
    key: list[KeyColumn],
    types: dict[str, str],
    check: TableCheck,
    step: int,
    out: Out,
) -> None:
    how = comparable(types, frame)
    bounds = [tuple(r) for r in conn.execute(boundaries_query(table_sql(ref), key, step))]
    sink = SearchSink(client, ref.search, ref.topic, out) if ref.search else None
    fields = [c for c, _ in ref.search.fields] if ref.search else []
    started = said = time.monotonic()
    shown = progress.bar(f"verify {ref.name}", total=_count(conn, ref), unit="row")
    for part in ranges(bounds or [()]):
        source = source_range(conn, table_sql(ref), key, part, captured_columns(types, ref))
        check.delta.add(
            {k: how.row(r) for k, r in source.items()}, lake_range(frame, key, part, how)
        )
        if sink is not None and check.index is not None:
            _compare_index(client, sink.alias, source, fields, check.index)
        shown.update(len(source))
        if shown.disable and time.monotonic() - said >= PROGRESS_EVERY_S:
            said = time.monotonic()
            rate = check.delta.rows / (said - started)
            out(f"{ref.name}: {check.delta.rows:,} rows compared ({rate:,.0f}/s)")
    shown.close()
    if sink is not None and check.index is not None:
        found = check.index.rows - check.index.missing
        count = client.request("GET", f"/{sink.alias}/_count")
        check.index.extra = max(0, int(count["count"]) - found)
        if check.index.extra:
            check.index.samples.append(
                f"extra: {check.index.extra} documents whose keys are not in the source"
            )


def _compare_index(
    client: SearchClient,
    alias: str,
    source: dict[Any, dict[str, Any]],
    fields: list[str],
    differences: Differences,
) -> None:
    from changelake.verify.canonical import document_value

    ids = {doc_id(k): k for k in source}
    docs = index_range(client, alias, ids, fields)
    wanted = {k: {f: document_value(row.get(f)) for f in fields} for k, row in source.items()}
    before_extra = differences.extra
    differences.add(wanted, docs)
    differences.extra = before_extra  # extras are counted once, from the index's total


def print_report(checks: list[TableCheck], out: Out) -> None:
    for c in checks:
        if c.stopped is not None:
            out(f"{c.table}: NOT VERIFIED: the pipeline stopped it ({c.stopped})")
            continue
        for d in filter(None, (c.delta, c.index)):
            verdict = "equal"
            if not d.equal:
                verdict = f"DIFFERENT: {d.missing:,} missing, {d.extra:,} extra"
                verdict += f", {d.differing:,} differing"
            out(f"{c.table} ({d.target}): {d.rows:,} source rows, {verdict}")
            for sample in d.samples:
                out(f"    {sample}")
