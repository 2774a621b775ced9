"""Primary-key ranges: the source table cut into slices of about `step` rows, by key order.

Both sides must order keys the same way: text keys are compared byte-wise (`COLLATE "C"` in
Postgres, which for UTF-8 is code-point order, as Spark compares strings), other types by value.
A range is [lower, upper): None means unbounded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

TEXT_TYPES = {"text", "character varying", "character", "uuid", "name", "citext"}
Key = tuple[Any, ...]


@dataclass(frozen=True)
class KeyColumn:
    name: str
    text: bool  # ordered byte-wise, as text


@dataclass(frozen=True)
class KeyRange:
    lower: Key | None
    upper: Key | None


def ranges(boundaries: Sequence[Key]) -> list[KeyRange]:
    """[None, b1), [b1, b2), …, [bn, None) from the sorted boundaries b0 < b1 < … (b0, the first
    key, is covered by the first range)."""
    cuts = list(boundaries[1:])
    lowers: list[Key | None] = [None, *cuts]
    uppers: list[Key | None] = [*cuts, None]
    return [KeyRange(lo, up) for lo, up in zip(lowers, uppers, strict=True)]


def ordered_key(key: Sequence[KeyColumn]) -> sql.Composed:
    """The key columns as Postgres must order them to agree with Spark (text byte-wise)."""
    return sql.SQL(", ").join(
        sql.SQL('({}::text COLLATE "C")').format(sql.Identifier(k.name))
        if k.text
        else sql.Identifier(k.name)
        for k in key
    )


def boundaries_query(table: sql.Composable, key: Sequence[KeyColumn], step: int) -> sql.Composed:
    """Every `step`-th key in key order (the first key included)."""
    names = sql.SQL(", ").join(sql.Identifier(k.name) for k in key)
    return sql.SQL(
        "SELECT {names} FROM (SELECT {names}, row_number() OVER (ORDER BY {ordered}) AS rn"
        " FROM {table}) s WHERE (rn - 1) % {step} = 0 ORDER BY {ordered}"
    ).format(names=names, ordered=ordered_key(key), table=table, step=sql.Literal(step))


def next_boundary_query(
    table: sql.Composable, key: Sequence[KeyColumn], lower: Key | None, step: int
) -> tuple[sql.Composed, list[Any]]:
    """The key `step` rows past `lower` (from the first key when None), in key order: the upper
    bound of the range that starts at `lower` (no row: the range runs to the table's end)."""
    names = sql.SQL(", ").join(sql.Identifier(k.name) for k in key)
    where, params = source_filter(key, KeyRange(lower, None))
    query = sql.SQL("SELECT {} FROM {} WHERE {} ORDER BY {} OFFSET {} LIMIT 1").format(
        names, table, where, ordered_key(key), sql.Literal(step)
    )
    return query, params


def source_filter(key: Sequence[KeyColumn], part: KeyRange) -> tuple[sql.Composable, list[Any]]:
    """A WHERE clause (and its parameters) selecting the range in Postgres."""
    row = sql.SQL("({})").format(ordered_key(key))
    marks = sql.SQL("({})").format(sql.SQL(", ").join(sql.Placeholder() * len(key)))
    clauses: list[sql.Composable] = []
    params: list[Any] = []
    if part.lower is not None:
        clauses.append(sql.SQL("{} >= {}").format(row, marks))
        params += [_as_text(k, v) for k, v in zip(key, part.lower, strict=True)]
    if part.upper is not None:
        clauses.append(sql.SQL("{} < {}").format(row, marks))
        params += [_as_text(k, v) for k, v in zip(key, part.upper, strict=True)]
    if not clauses:
        return sql.SQL("TRUE"), []
    return sql.SQL(" AND ").join(clauses), params


def lake_filter(key: Sequence[KeyColumn], part: KeyRange, types: dict[str, DataType]) -> Column:
    """The same range over the Delta table. Struct comparison is field by field, in order, and
    needs both sides of exactly the same type: the bounds take the columns' names and types."""
    row = F.struct(*[F.col(k.name) for k in key])

    def bound(values: Key) -> Column:
        return F.struct(
            *[
                F.lit(_as_text(k, v)).cast(types[k.name]).alias(k.name)
                for k, v in zip(key, values, strict=True)
            ]
        )

    condition = F.lit(True)
    if part.lower is not None:
        condition &= row >= bound(part.lower)
    if part.upper is not None:
        condition &= row < bound(part.upper)
    return condition


def _as_text(column: KeyColumn, value: Any) -> Any:
    return str(value) if column.text else value
