"""Columns a table's lake keeps that its source no longer has: a column dropped at the source
(or renamed, where the lake carries the values over to the new name) keeps its last values in
the lake, by design, and `status` names it so nobody reads it as current."""

from __future__ import annotations

from collections.abc import Iterable

import psycopg

from changelake.exceptions import ConfigError, first_line
from changelake.settings import Settings
from changelake.tables import TableRef, source_of_table

_COLUMNS_SQL = (
    "SELECT table_schema, table_name, column_name FROM information_schema.columns"
    " WHERE (table_schema, table_name) IN (SELECT * FROM unnest(%s::text[], %s::text[]))"
)


def source_columns(
    settings: Settings, refs: Iterable[TableRef], problems: list[str]
) -> dict[str, set[str]]:
    """Per table (by name), the columns its source table has now; a table whose source cannot be
    read is left out (and said in `problems`)."""
    by_source: dict[object, list[TableRef]] = {}
    for ref in refs:
        by_source.setdefault(ref.source, []).append(ref)
    found: dict[str, set[str]] = {}
    for group in by_source.values():
        try:
            with psycopg.connect(source_of_table(settings, group[0]).dsn(), connect_timeout=3) as c:
                schemas, names = [r.schema for r in group], [r.table for r in group]
                rows = c.execute(_COLUMNS_SQL, (schemas, names)).fetchall()
        except (ConfigError, psycopg.Error) as exc:
            problems.append(
                f"postgres: cannot read the columns of {group[0].name}: {first_line(exc)}"
            )
            continue
        columns: dict[tuple[str, str], set[str]] = {}
        for schema, table, column in rows:
            columns.setdefault((schema, table), set()).add(column)
        for ref in group:
            if (ref.schema, ref.table) in columns:
                found[ref.name] = columns[ref.schema, ref.table]
    return found


def dropped(lake_columns: Iterable[str], source: set[str] | None) -> list[str]:
    """The lake's own columns (changelake's `_cdc_…` and `_kafka_…` aside) the source lacks."""
    if source is None:
        return []
    return [c for c in lake_columns if c not in source and not c.startswith(("_cdc_", "_kafka_"))]
