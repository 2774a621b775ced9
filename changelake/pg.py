"""Connecting to the source Postgres, with a failure that names where and what to do."""

from __future__ import annotations

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow

from changelake.exceptions import RetryableError

CONNECT_TIMEOUT_S = 10


def pg_lsn(lsn: int) -> str:
    """An LSN as Postgres prints it (`16/B374D848`)."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def where(dsn: str) -> str:
    """host:port/dbname of a DSN, for messages: never the password."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparsable DSN>"
    host = parts.get("host") or parts.get("hostaddr") or "localhost"
    return f"{host}:{parts.get('port') or 5432}/{parts.get('dbname') or '?'}"


def connect(dsn: str, *, autocommit: bool = False) -> psycopg.Connection[TupleRow]:
    """A connection, or a RetryableError naming the server (a wrong password included)."""
    try:
        return psycopg.connect(dsn, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.OperationalError as exc:
        raise RetryableError(
            f"cannot connect to Postgres at {where(dsn)}: {exc}".strip(),
            hint="start the stack with `changelake stack up`, or check the connector file's "
            "database.* settings and the variables they name (CHANGELAKE_PG_HOST, "
            "CHANGELAKE_PG_PORT, CHANGELAKE_DEBEZIUM_PASSWORD)",
        ) from exc


def current_wal_lsn(conn: psycopg.Connection[TupleRow]) -> str:
    """The WAL position written so far, as text (`0/16B3748`)."""
    row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    return str(row[0]) if row else "0/0"


def slot_confirmed(conn: psycopg.Connection[TupleRow], slot: str, lsn: str) -> bool:
    """Whether replication slot `slot` has confirmed every WAL position up to `lsn`."""
    row = conn.execute(
        "SELECT confirmed_flush_lsn >= %s::pg_lsn FROM pg_replication_slots WHERE slot_name = %s",
        (lsn, slot),
    ).fetchone()
    return bool(row and row[0])


def wal_insert_lsn(cur: psycopg.Cursor[TupleRow]) -> int:
    """Where the next WAL record goes, in bytes: inside a transaction, past what it wrote so far
    (`pg_current_wal_lsn` only moves on flushes)."""
    row = cur.execute("SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint").fetchone()
    return int(row[0]) if row else 0


def current_xid(cur: psycopg.Cursor[TupleRow]) -> int:
    """This transaction's id (assigning one if it wrote nothing yet), epoch included."""
    row = cur.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()
    return int(row[0]) if row else 0
