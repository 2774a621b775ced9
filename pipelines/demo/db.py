"""Connecting to the demo database, and turning its failures into errors a user can act on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow

from pipelines.exceptions import ChangelakeError, RetryableError

SHOP_TABLES = ("public.customers", "public.products", "public.orders", "public.order_lines")
_SCHEMA_HINT = "apply schemas/shop.sql to that database (`changelake stack up` does it)"


def where(dsn: str) -> str:
    """host:port/dbname of a DSN, for messages: never the password."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparsable DSN>"
    host = parts.get("host") or parts.get("hostaddr") or "localhost"
    return f"{host}:{parts.get('port') or 5432}/{parts.get('dbname') or '?'}"


def connect(dsn: str) -> psycopg.Connection[TupleRow]:
    try:
        return psycopg.connect(dsn, autocommit=False)
    except psycopg.OperationalError as exc:
        raise RetryableError(
            f"cannot connect to Postgres at {where(dsn)}: {exc}".strip(),
            hint="start the stack with `changelake stack up`, or check the DSN",
        ) from exc


@contextmanager
def friendly_errors(dsn: str, doing: str) -> Iterator[None]:
    """Re-raise database failures as ChangelakeErrors naming the database and the step."""
    try:
        yield
    except errors.UndefinedTable as exc:
        raise ChangelakeError(
            f"{doing}: the shop tables are missing in {where(dsn)}: {exc}".strip(),
            hint=_SCHEMA_HINT,
        ) from exc
    except psycopg.OperationalError as exc:
        raise RetryableError(
            f"{doing}: lost the connection to Postgres at {where(dsn)}: {exc}".strip(),
            hint="check that Postgres is up (`changelake status`) and run the command again",
        ) from exc
    except psycopg.Error as exc:
        raise ChangelakeError(f"{doing} failed in {where(dsn)}: {exc}".strip()) from exc


def serial_sequence(table: str) -> str:
    """SQL for the identity sequence behind `table.id` (quoted as Postgres needs it)."""
    return f"pg_get_serial_sequence('{table}', 'id')"
