"""Connecting to the demo database, and turning its failures into errors a user can act on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import errors

from changelake.exceptions import ChangelakeError, RetryableError
from changelake.pg import connect, where

__all__ = ["SHOP_TABLES", "connect", "friendly_errors", "serial_sequence", "where"]

SHOP_TABLES = ("public.customers", "public.products", "public.orders", "public.order_lines")
_SCHEMA_HINT = "apply schemas/shop.sql to that database (`changelake stack up` does it)"


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
