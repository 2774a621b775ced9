"""Asking Debezium to re-send rows through the log: an `execute-snapshot` signal (an incremental
snapshot) whose additional condition per table selects just the given keys, written into the
connector's signal table. Debezium reads them in chunks between watermarks, so a row changed while
it is read is sent from the change, not the read; the pipeline's LSN guard applies the re-sent
rows like any other change. `verify --repair`, the pipeline's key-change check and its seam repair
(`changelake.capture.seams`) use it."""

from __future__ import annotations

import contextlib
import json
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg
from psycopg import sql

from changelake import pg
from changelake.capture.caught_up import NUDGE_EVERY_S
from changelake.capture.connect_offsets import offsets_end, stored_offsets
from changelake.exceptions import ChangelakeError
from changelake.tables import TableRef
from changelake.verify.ranges import Key, KeyColumn, ordered_key

SIGNAL_DATA_MAX = 2048  # the signal table's data column: varchar(2048) (schemas/changelake.sql)
MOST_SPANS = 64  # key runs per table: a few scattered keys each re-send just themselves
POLL_S = 0.5
PROGRESS_EVERY_S = 10.0
Out = Callable[[str], None]


class Wanted(Protocol):
    """What to re-send of one table, as the WHERE fragment Debezium adds to its chunk query."""

    @property
    def ref(self) -> TableRef: ...

    def condition(self, runs: int) -> sql.Composable: ...


@dataclass(frozen=True)
class Request:
    """What to re-send of one table: its key columns and the keys."""

    ref: TableRef
    key: list[KeyColumn]
    keys: list[Key]

    def condition(self, runs: int) -> sql.Composable:
        """The keys cut into at most `runs` runs (fewer, wider runs fit a smaller signal)."""
        return condition(self.key, spans(self.key, self.keys, runs))


@dataclass(frozen=True)
class WrittenBy:
    """Every row of one table that transaction `xid` wrote and no later one changed: a row
    version's `xmin` is the transaction that made it (a subtransaction's rows carry their own)."""

    ref: TableRef
    xid: int  # the 32-bit xid, as Debezium and `xmin` hold it

    def condition(self, runs: int) -> sql.Composable:
        return sql.SQL("(xmin = {}::xid)").format(sql.Literal(str(self.xid)))


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


def signal_data(conn: psycopg.Connection[Any], requests: Sequence[Wanted]) -> str:
    """The signal's JSON: every table with its condition, as many key runs as fit the column."""
    count = MOST_SPANS
    while True:
        conditions = [
            {
                "data-collection": f"{r.ref.schema}.{r.ref.table}",
                "filter": r.condition(count).as_string(conn),
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


def send(
    dsn: str, signal_table: str, requests: Sequence[Wanted], signal_id: str | None = None
) -> str:
    """Write one `execute-snapshot` signal for a connector's tables; returns its id (a fresh
    one unless given: a signal id is written once, so a given one makes the ask idempotent)."""
    schema, _, table = signal_table.rpartition(".")
    signal_id = signal_id or str(uuid.uuid4())
    with pg.connect(dsn, autocommit=True) as conn:
        data = signal_data(conn, requests)
        if len(data) > SIGNAL_DATA_MAX:
            raise ChangelakeError(
                f"re-send: the keys of {', '.join(r.ref.name for r in requests)} do not "
                f"fit one signal ({len(data):,} of {SIGNAL_DATA_MAX:,} characters)",
                "re-send fewer tables at once (`changelake verify --repair TABLE`)",
            )
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (id, type, data) VALUES (%s, 'execute-snapshot', %s)"
                " ON CONFLICT (id) DO NOTHING"
            ).format(sql.Identifier(schema or "public", table)),
            (signal_id, data),
        )
    return signal_id


@dataclass(frozen=True)
class Asked:
    """A re-send asked for: what waiting for it needs."""

    connector: str
    dsn: str
    signal_table: str
    signal_id: str
    since: dict[int, int]  # the offsets topic's end before the signal


def settle(
    bootstrap: str,
    asked: Sequence[Asked],
    timeout_s: float,
    out: Out,
    heartbeats: Mapping[str, str] | None = None,
) -> None:
    """Wait until each connector asked has re-sent its rows, all within `timeout_s` (for `run
    --once`); `heartbeats`: each connector's heartbeat.action.query, run to move it on once its
    snapshot closed."""
    deadline = time.monotonic() + timeout_s
    for a in asked:
        beat = (heartbeats or {}).get(a.connector, "")
        left = max(1.0, deadline - time.monotonic())
        wait_resent(
            a.dsn, bootstrap, a.connector, a.signal_table, a.signal_id, a.since, left, out, beat
        )


def wait_resent(
    dsn: str,
    bootstrap: str,
    connector: str,
    signal_table: str,
    signal_id: str,
    since: dict[int, int],
    timeout_s: float,
    out: Out,
    heartbeat: str = "",
) -> None:
    """Until Debezium has sent everything the signal asked for: it closed a window of that
    snapshot (its marker row in the signal table), and then stored an offset past that point
    that no longer carries the snapshot (offsets carry a running one). Debezium stores one when
    it has a change to store it with: on a quiet database its next heartbeat, so `heartbeat`
    (the connector's heartbeat.action.query) is run meanwhile, as caught_up does."""
    schema, _, table = signal_table.rpartition(".")
    closed = sql.SQL(
        "SELECT count(*) FROM {} WHERE type = 'snapshot-window-close' AND data LIKE %s"
    ).format(sql.Identifier(schema or "public", table))
    deadline = time.monotonic() + timeout_s
    windows, past = 0, 0
    said = nudged = time.monotonic()
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
            if windows and heartbeat and time.monotonic() >= nudged + NUDGE_EVERY_S:
                with contextlib.suppress(psycopg.Error):  # its own heartbeats still come
                    cur.execute(heartbeat.encode())
                nudged = time.monotonic()
            if time.monotonic() - said >= PROGRESS_EVERY_S:
                said = time.monotonic()
                out(f"repair: {connector} re-sending: {windows} chunk(s) so far")
            time.sleep(POLL_S)
    raise ChangelakeError(
        f"connector {connector} has not finished re-sending after "
        f"{timeout_s:.0f}s ({windows} chunk(s) sent; signal {signal_id} in {signal_table})",
        "is the connector RUNNING (`changelake connectors status`)? Debezium's log says more",
    )
