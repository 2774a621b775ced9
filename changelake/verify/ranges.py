"""Primary-key ranges: the source table cut into slices of about `step` rows, by key order.

Both sides must order keys the same way: text keys are compared byte-wise (`COLLATE "C"` in
Postgres, which for UTF-8 is code-point order, as Spark compares strings), other types by value.
A range is [lower, upper): None means unbounded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

from psycopg import sql
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

TEXT_TYPES = {"text", "character varying", "character", "uuid", "name", "citext"}
Key = tuple[Any, ...]
Compare = Callable[[Column, Column], Column]


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
    """The same range over the Delta table, as comparisons of each key column with a literal of
    its type (a bound compares key columns in order, lexicographically): the form Delta's data
    skipping and Parquet's row-group filters understand, so a range's read can skip the files
    and row groups whose key statistics lie outside it (a struct comparison cannot)."""

    def literal(column: KeyColumn, value: Any) -> Column:
        return F.lit(_as_text(column, value)).cast(types[column.name])

    def beyond(values: Key, past: Compare, last: Compare) -> Column:
        """Lexicographically past `values`: an earlier column `past` its bound and every one
        before it equal to its own, or every column but the last equal and the last `last`."""
        either: list[Column] = []
        equal: Column | None = None
        pairs = list(zip(key, values, strict=True))
        for i, (column, value) in enumerate(pairs):
            this, bound = F.col(column.name), literal(column, value)
            compare = last if i == len(pairs) - 1 else past
            either.append(compare(this, bound) if equal is None else equal & compare(this, bound))
            equal = this == bound if equal is None else equal & (this == bound)
        return reduce(lambda a, b: a | b, either)

    condition = F.lit(True)
    if part.lower is not None:
        condition &= beyond(part.lower, lambda c, b: c > b, lambda c, b: c >= b)
    if part.upper is not None:
        condition &= beyond(part.upper, lambda c, b: c < b, lambda c, b: c < b)
    return condition


def _as_text(column: KeyColumn, value: Any) -> Any:
    return str(value) if column.text else value
