"""`changelake verify --repair`: ask Debezium to re-send, through the log, the rows verify found
missing or different, then verify again.

The request is Debezium's `execute-snapshot` signal (an incremental snapshot) with an additional
condition per table that selects just those keys, written into the connector's signal table.
Debezium reads them in chunks between watermarks, so a row changed while it is read is sent
from the change, not the read; the pipeline's LSN guard applies them like any other change (a
re-sent row carries the LSN of its chunk's closing watermark, above the stored row's). Nothing
is written to Delta or the index behind the pipeline's back.

What a re-send cannot repair: a derived row whose key the source no longer has (an extra row)
needs a delete, and a snapshot sends none; verify names them and `run --resnapshot` rebuilds.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from pyspark.sql import SparkSession

from pipelines import pg
from pipelines.connect_offsets import offsets_end, stored_offsets
from pipelines.exceptions import ChangelakeError, ConfigError
from pipelines.settings import Settings
from pipelines.stack.postgres import Postgres
from pipelines.tables import TableRef
from pipelines.verify.command import TableCheck, verify
from pipelines.verify.ranges import Key, KeyColumn, ordered_key

SIGNAL_DATA_MAX = 2048  # the signal table's data column: varchar(2048) (schemas/capture.sql)
MOST_SPANS = 64  # key runs per table: a few scattered keys each re-send just themselves
POLL_S = 0.5
PROGRESS_EVERY_S = 10.0
Out = Callable[[str], None]


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
                "data-collection": f"{r.ref.schema}.{r.ref.name}",
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
                f"verify --repair: the keys of {', '.join(r.ref.name for r in requests)} do not "
                f"fit one signal ({len(data):,} of {SIGNAL_DATA_MAX:,} characters)",
                "repair fewer tables at once: `changelake verify --repair TABLE`",
            )
        conn.execute(
            sql.SQL("INSERT INTO {} (id, type, data) VALUES (%s, 'execute-snapshot', %s)").format(
                sql.Identifier(schema or "public", table)
            ),
            (signal_id, data),
        )
    return signal_id


def wait_resent(
    dsn: str,
    bootstrap: str,
    connector: str,
    signal_table: str,
    signal_id: str,
    since: dict[int, int],
    timeout_s: float,
    out: Out,
) -> None:
    """Until Debezium has sent everything the signal asked for: it closed a window of that
    snapshot (its marker row in the signal table), and then stored an offset past that point
    that no longer carries the snapshot (offsets carry a running one)."""
    schema, _, table = signal_table.rpartition(".")
    closed = sql.SQL(
        "SELECT count(*) FROM {} WHERE type = 'snapshot-window-close' AND data LIKE %s"
    ).format(sql.Identifier(schema or "public", table))
    deadline = time.monotonic() + timeout_s
    windows, past = 0, 0
    said = time.monotonic()
    with pg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        while time.monotonic() < deadline:
            row = cur.execute(closed, (f'%"{signal_id}"%',)).fetchone()
            now = int(row[0]) if row else 0
            if now != windows:  # a window closed since: the snapshot is done only past it
                windows, past = now, pg.wal_insert_lsn(cur)
            end = offsets_end(bootstrap)
            for stored in stored_offsets(bootstrap, since):
                if (
                    windows
                    and stored.connector == connector
                    and stored.lsn >= past
                    and stored.snapshot_correlation != signal_id
                ):
                    return
            since = end
            if time.monotonic() - said >= PROGRESS_EVERY_S:
                said = time.monotonic()
                out(f"repair: {connector} re-sending: {windows} chunk(s) so far")
            time.sleep(POLL_S)
    raise ChangelakeError(
        f"verify --repair: connector {connector} has not finished re-sending after "
        f"{timeout_s:.0f}s ({windows} chunk(s) sent; signal {signal_id} in {signal_table})",
        "is the connector RUNNING (`changelake connectors status`)? Debezium's log says more",
    )


def repair(
    requests: Sequence[Request],
    dsn_for: Callable[[TableRef], str],
    bootstrap: str,
    timeout_s: float,
    out: Out,
) -> None:
    """Re-send each connector's requested keys, one signal per connector, and wait for it."""
    by_connector: dict[str, list[Request]] = {}
    for r in requests:
        by_connector.setdefault(r.ref.connector, []).append(r)
    for connector, asked in by_connector.items():
        signal_table = asked[0].ref.signal_table
        if not signal_table:
            raise ConfigError(
                f"connector {connector}: no signal.data.collection, so Debezium cannot be asked "
                "to re-send rows",
                "add a signal table to the connector file (see connectors/shop-postgres.json)",
            )
        dsn = dsn_for(asked[0].ref)
        since = offsets_end(bootstrap)
        signal_id = send(dsn, signal_table, asked)
        said = ", ".join(f"{r.ref.name} ({len(r.keys):,} keys)" for r in asked)
        out(f"repair: asked {connector} to re-send {said} (signal {signal_id})")
        wait_resent(dsn, bootstrap, connector, signal_table, signal_id, since, timeout_s, out)
        out(f"repair: {connector} has re-sent them")


def verify_repairing(
    settings: Settings,
    spark: SparkSession,
    refs: list[TableRef],
    out: Out,
    timeout_s: float,
    step: int,
    passes: int,
) -> list[TableCheck]:
    """Verify; while rows differ (up to `passes` times), re-send them and verify again. A row
    changed at the source meanwhile is fine: the next verify compares it as it is then."""
    checks = verify(settings, spark, refs, out, timeout_s, step)

    def source_dsn(ref: TableRef) -> str:
        return Postgres(settings).admin_dsn(ref.database)

    for number in range(1, passes + 1):
        requests = [
            Request(ref, check.key, check.resend)
            for ref, check in zip(refs, checks, strict=True)
            if check.resend
        ]
        for ref, check in zip(refs, checks, strict=True):
            if check.delta.extra:
                out(
                    f"{ref.name}: {check.delta.extra:,} extra rows cannot be re-sent (the source "
                    f"has no such keys); `changelake run --resnapshot {ref.name}` rebuilds it"
                )
        if not requests:
            break
        out(f"repair pass {number} of {passes}")
        repair(requests, source_dsn, settings.kafka_bootstrap, timeout_s, out)
        checks = verify(settings, spark, refs, out, timeout_s, step)
    return checks
