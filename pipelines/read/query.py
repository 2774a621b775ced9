"""The read side: SQL over the derived Delta tables, and the three ways to print a result.

Every captured table that exists is a temporary view under its table name (`orders`), and the
dead letters are `_errors`. Results are collected to the driver, so they are capped at
`MAX_ROWS`: a larger result is an error that says to add a LIMIT or an aggregate, never a silent
truncation (a cut-off CSV export would look complete).

The formatters are pure (columns and rows in, text out) and need no Spark.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import logging
import math
import re
import unicodedata
from collections.abc import Sequence
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from pipelines import tables
from pipelines.exceptions import ChangelakeError
from pipelines.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

MAX_ROWS = 10_000
ERRORS_VIEW = "_errors"
Rows = list[tuple[Any, ...]]
# Java frames ("\tat org.apache...(File.java:12)", "... 42 more") in messages of failed jobs.
_JAVA_FRAME = re.compile(r"^\s*(at [\w$.<>/]+\(.*\)|\.\.\. \d+ more)\s*$")
_PLAN_SUFFIX = re.compile(r"(SQLSTATE: \w+[^\n]*?);\n.*", re.DOTALL)


def errors_path(settings: Settings) -> str:
    return f"{settings.lake.rstrip('/')}/{ERRORS_VIEW}"


# --- Spark side --------------------------------------------------------------------------------


def register_views(spark: SparkSession, settings: Settings) -> list[str]:
    """A temporary view per existing table, as of its newest change (base ⊕ changelog; a
    soft-deleting table's deleted rows marked), and `_errors`; returns the view names."""
    from pipelines.read.table import read_table
    from pipelines.sinks.delta import delta_exists

    views = []
    for ref in tables.captured(settings):
        path = ref.path(settings.lake)
        if delta_exists(spark, path):
            read_table(spark, path, ref.soft_delete).rows.createOrReplaceTempView(ref.name)
            views.append(ref.name)
    if delta_exists(spark, errors_path(settings)):
        spark.read.format("delta").load(errors_path(settings)).createOrReplaceTempView(ERRORS_VIEW)
        views.append(ERRORS_VIEW)
    return views


def run_query(settings: Settings, sql: str, max_rows: int = MAX_ROWS) -> tuple[list[str], Rows]:
    """Column names and rows (Python values) of one SQL statement over the lake's views."""
    from pipelines.spark import session

    _refuse_writes(sql)
    spark = session(settings, app="changelake-query")
    _quiet(spark)
    views = register_views(spark, settings)
    df, rows = _execute(spark, sql, views, max_rows)
    if len(rows) > max_rows:
        raise ChangelakeError(
            f"the query returns more than {max_rows:,} rows",
            "add a LIMIT, a WHERE or an aggregate (results are collected into memory)",
        )
    return list(df.columns), rows


READ_ONLY = ("select", "with", "show", "describe", "desc", "explain", "values", "table", "(")


def _refuse_writes(sql: str) -> None:
    """The derived tables are written by the pipeline alone: a DELETE here would silently make
    them differ from the source."""
    first = sql.strip().split(None, 1)[0].lower() if sql.strip() else ""
    if not first.startswith(READ_ONLY):
        raise ChangelakeError(
            f"changelake query runs read-only statements; {first.upper() or 'an empty query'}"
            " is not one",
            "use SELECT, WITH, SHOW, DESCRIBE or EXPLAIN",
        )


def _quiet(spark: SparkSession) -> None:
    """A failed query is shown once, as our error: PySpark would first log it as JSON, and Spark's
    executors their Java stack traces, on stderr. Only for the query process's own session."""
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)
    spark.sparkContext.setLogLevel("FATAL")


def _execute(
    spark: SparkSession, sql: str, views: list[str], max_rows: int
) -> tuple[DataFrame, Rows]:
    from pyspark.errors import PySparkException

    try:
        df = spark.sql(sql)
        # One row past the cap tells "exactly max_rows" from "more than max_rows".
        return df, _collect(df, max_rows + 1)
    except PySparkException as exc:
        raise ChangelakeError(spark_message(exc), _tables_hint(views)) from None


def _collect(df: DataFrame, limit: int) -> Rows:
    """Rows as plain tuples, with every TIMESTAMP (also inside structs, arrays and maps) as a
    timezone-aware UTC datetime.

    PySpark turns a TIMESTAMP into a naive datetime in the *Python process's* local zone, which
    is lossy around DST changes. Cast to TIMESTAMP_NTZ in Spark (session zone UTC, see spark.py),
    it arrives as the exact UTC wall clock and gets its tzinfo back here. Columns are renamed by
    position first, so duplicate names (a join's two `id`s) cannot make the select ambiguous.
    """
    from pyspark.sql import functions as F

    renamed = df.toDF(*[f"c{i}" for i in range(len(df.columns))])
    types = [f.dataType for f in renamed.schema.fields]
    cols = [
        F.col(name).cast(_ntz(t)) if _ntz(t) != t else F.col(name)
        for name, t in zip(renamed.columns, types, strict=True)
    ]
    rows = renamed.select(cols).limit(limit).collect()
    return [tuple(_aware(v, t) for v, t in zip(row, types, strict=True)) for row in rows]


def _ntz(t: DataType) -> DataType:
    """The same type with every TIMESTAMP replaced by TIMESTAMP_NTZ."""
    from pyspark.sql import types as T

    if isinstance(t, T.TimestampType):
        return T.TimestampNTZType()
    if isinstance(t, T.ArrayType):
        return T.ArrayType(_ntz(t.elementType), t.containsNull)
    if isinstance(t, T.MapType):
        return T.MapType(_ntz(t.keyType), _ntz(t.valueType), t.valueContainsNull)
    if isinstance(t, T.StructType):
        return T.StructType([T.StructField(f.name, _ntz(f.dataType), f.nullable) for f in t])
    return t


def _aware(value: Any, t: DataType) -> Any:
    """A collected value with UTC put back on what was a TIMESTAMP in `t` (the original type)."""
    from pyspark.sql import Row
    from pyspark.sql import types as T

    if value is None:
        return None
    if isinstance(t, T.TimestampType):
        return value.replace(tzinfo=UTC)
    if isinstance(t, T.ArrayType):
        return [_aware(v, t.elementType) for v in value]
    if isinstance(t, T.MapType):
        return {_aware(k, t.keyType): _aware(v, t.valueType) for k, v in value.items()}
    if isinstance(t, T.StructType):
        values = [_aware(v, f.dataType) for v, f in zip(value, t.fields, strict=True)]
        return Row(*t.names)(*values)
    return value


def spark_message(exc: BaseException) -> str:
    """Spark's own message, without the JVM stack trace PySpark appends or a job's Java frames."""
    text = str(exc).split("\n\nJVM stacktrace:", 1)[0]
    text = text.split("\nDriver stacktrace:", 1)[0]
    # An analysis error appends the unresolved plan after "SQLSTATE: ...;": not for people.
    text = _PLAN_SUFFIX.sub(r"\1", text)
    lines = [line for line in text.splitlines() if not _JAVA_FRAME.match(line)]
    return "\n".join(lines).strip() or type(exc).__name__


def _tables_hint(views: list[str]) -> str:
    if not views:
        return "no derived tables exist yet: start the pipeline with `changelake run`"
    return f"tables: {', '.join(views)}"


# --- Formatting --------------------------------------------------------------------------------


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


def format_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """RFC 4180 CSV with a header line; NULL is an empty field."""
    if not columns:  # a statement without a result (a SET, a CREATE VIEW)
        return ""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(["" if v is None else _text(v) for v in row] for row in rows)
    return out.getvalue()


def format_json(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A JSON array of objects. Decimals are strings (exact), times ISO 8601, bytes base64."""
    keys = _unique(columns)
    objects = [{k: _jsonable(v) for k, v in zip(keys, row, strict=True)} for row in rows]
    return json.dumps(objects, ensure_ascii=False, indent=2, allow_nan=False)


def _unique(columns: Sequence[str]) -> list[str]:
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
