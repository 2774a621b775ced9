"""Query results as text, for people (aligned columns) and programs (CSV, JSON): pure
functions of column names and Python rows, no Spark. The CSV and JSON writers take rows as they
come, so a result of any size streams to a file or stdout."""

from __future__ import annotations

import base64
import csv
import json
import math
import unicodedata
from collections.abc import Iterable, Sequence
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any, TextIO


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Aligned columns for people: numbers right-aligned, NULL for null, then `(N rows)`."""
    cells = [[_cell(v) for v in row] for row in rows]
    right = [_numeric_column(rows, i) for i in range(len(columns))]
    lines = grid(list(columns), cells, right) if columns else []
    lines.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(lines)


def grid(header: list[str], cells: list[list[str]], right: list[bool]) -> list[str]:
    """psql-style lines: ` a | b `, a rule, then one line per row (cells already text)."""
    widths = [
        max([text_width(h)] + [text_width(r[i]) for r in cells]) for i, h in enumerate(header)
    ]

    def line(values: list[str]) -> str:
        return "|".join(
            f" {_pad(v, w, r)} " for v, w, r in zip(values, widths, right, strict=True)
        ).rstrip()

    rule = "+".join("-" * (w + 2) for w in widths)
    return [line(header), rule, *(line(r) for r in cells)]


def text_width(text: str) -> int:
    """Terminal columns: East Asian wide characters take two, combining marks none."""
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        for c in text
    )


def _pad(text: str, width: int, right: bool) -> str:
    fill = " " * (width - text_width(text))
    return fill + text if right else text + fill


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def _numeric_column(rows: Sequence[Sequence[Any]], i: int) -> bool:
    values = [row[i] for row in rows if row[i] is not None]
    return bool(values) and all(_is_number(v) for v in values)


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    # One line per row: control characters would break the alignment.
    return _text(value).replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def _text(value: Any) -> str:
    """One value as text for the table and CSV (None is handled by the caller)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return format(value, "f")  # exact digits, never 1E+2
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return "\\x" + bytes(value).hex()  # as Postgres prints bytea
    if isinstance(value, str | int | float):
        return str(value)
    return json.dumps(_jsonable(value), ensure_ascii=False, separators=(",", ":"))


def write_csv(columns: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO) -> int:
    """RFC 4180 CSV with a header line, written as the rows come; NULL is an empty field.
    Returns how many rows were written."""
    if not columns:  # a statement without a result (a SET, a CREATE VIEW)
        return 0
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    count = 0
    for row in rows:
        writer.writerow(["" if v is None else _text(v) for v in row])
        count += 1
    return count


def write_json(columns: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO) -> int:
    """A JSON array of objects, one per line, written as the rows come. Decimals are strings
    (exact), times ISO 8601, bytes base64. Returns how many rows were written."""
    keys = unique_names(columns)
    out.write("[")
    count = 0
    for row in rows:
        out.write(",\n" if count else "\n")
        obj = {k: _jsonable(v) for k, v in zip(keys, row, strict=True)}
        out.write(json.dumps(obj, ensure_ascii=False, allow_nan=False))
        count += 1
    out.write("\n]\n" if count else "]\n")
    return count


def unique_names(columns: Sequence[str]) -> list[str]:
    """Object keys must differ: a repeated column name (a join's `id`) becomes `id_2`, `id_3`."""
    seen: dict[str, int] = {}
    keys = []
    for name in columns:
        seen[name] = seen.get(name, 0) + 1
        keys.append(name if seen[name] == 1 else f"{name}_{seen[name]}")
    return keys


def _jsonable(value: Any) -> Any:
    """A collected Spark value as something json.dumps writes without losing information."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)  # JSON has no NaN or Infinity
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {_key(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "__fields__"):  # a pyspark Row (a struct)
        return {k: _jsonable(v) for k, v in zip(value.__fields__, value, strict=True)}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return str(value)


def _key(key: Any) -> str:
    """A map key as an object key (Spark maps may be keyed by numbers or dates)."""
    return key if isinstance(key, str) else "null" if key is None else _text(key)
