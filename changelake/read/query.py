"""The read side: SQL over the derived Delta tables.

Every captured table that exists is a temporary view under its table name (`orders`), and the
dead letters are `_errors`. A result printed as a table is collected to the driver, so it is
capped at `MAX_ROWS`: a larger one is an error that says to add a LIMIT or to export it, never a
silent truncation. Exports (read/export.py) stream rows of any number instead.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC
from typing import TYPE_CHECKING, Any

from changelake import tables
from changelake.exceptions import ChangelakeError
from changelake.lake.errors import ERRORS_VIEW, errors_rows
from changelake.settings import Settings

if TYPE_CHECKING:
    from py4j.protocol import Py4JJavaError
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

    from changelake.read.as_of import AsOf
    from changelake.views.derived import At

MAX_ROWS = 10_000
Values = tuple[Any, ...]  # one row, as Python values
Rows = list[Values]
# Java frames ("\tat org.apache...(File.java:12)", "... 42 more") in messages of failed jobs.
_JAVA_FRAME = re.compile(r"^\s*(at [\w$.<>/]+\(.*\)|\.\.\. \d+ more)\s*$")
_PLAN_SUFFIX = re.compile(r"(SQLSTATE: \w+[^\n]*?);\n.*", re.DOTALL)


# --- Spark side --------------------------------------------------------------------------------


def register_views(
    spark: SparkSession,
    settings: Settings,
    refs: list[tables.TableRef],
    sql: str = "",
    at: At | None = None,
) -> list[str]:
    """A temporary view per existing table, as of its newest change (its base table; a
    soft-deleting table's deleted rows marked), per view of views.json (once its tables have
    their histories; only those `sql` names, when given: building one reads its histories), and
    `_errors`; returns the view names. `at`: tables and views as of those transactions, from
    the histories (a table without one is left out)."""
    from changelake.lake.layout import delta_exists
    from changelake.lake.table import read_table
    from changelake.read.served_query import words
    from changelake.views.derived import build_view, derived_views
    from changelake.views.stored_history import rows_at

    views = []
    named = words(sql) if sql and not sql.strip().lower().startswith("show") else None
    for ref in refs:
        path = ref.path(settings.lake)
        if not delta_exists(spark, path):
            continue
        if at is None:
            read_table(spark, path, ref.soft_delete).rows.createOrReplaceTempView(ref.name)
            views.append(ref.name)
            continue
        point = at.get(ref.prefix)
        if (named is None or ref.name.lower() in named) and point is not None:
            rows = rows_at(spark, path, point)
            if rows is not None:
                rows.createOrReplaceTempView(ref.name)
                views.append(ref.name)
    for derived in derived_views(settings, refs):
        if named is not None and derived.name.lower() not in named:
            continue
        frame = build_view(spark, derived, at)
        if frame is not None:
            frame.createOrReplaceTempView(derived.name)
            views.append(derived.name)
    errors_rows(spark, settings).createOrReplaceTempView(ERRORS_VIEW)
    views.append(ERRORS_VIEW)
    return views


def open_query(
    settings: Settings,
    sql: str,
    served: bool = True,
    as_of: AsOf | None = None,
    say: Callable[[str], None] = print,
) -> tuple[DataFrame, list[str]]:
    """One read-only SQL statement over the lake's views, planned (not yet run); and the view
    names, for error hints. `served`: through the running pipeline's session when one serves
    this lake (not for a Parquet export, which the pipeline's process would write). `as_of`:
    every table and view as of one source transaction (read/as_of.py), in a local session;
    `say` tells which."""
    from pyspark.errors import PySparkException

    from changelake.read.served_query import connect, words
    from changelake.views.derived import derived_views

    _refuse_writes(sql)
    refs = tables.captured(settings)
    names = [r.name for r in refs] + [v.name for v in derived_views(settings, refs)]
    if as_of is not None:  # imported only then: reading histories pulls in the Delta writers
        from changelake.read.as_of import read_points, refuse_without_history

        refuse_without_history(words(sql), refs)
    remote = connect(settings, sql, names) if served and as_of is None else None  # warm session
    if remote is not None:
        spark, views = remote
    else:
        spark = _own_session(settings, say if served and as_of is None else None)
        at = read_points(spark, settings, refs, as_of, say) if as_of is not None else None
        views = register_views(spark, settings, refs, sql, at)
    try:
        return spark.sql(sql), views
    except PySparkException as exc:
        raise ChangelakeError(spark_message(exc), _tables_hint(views)) from None


def _own_session(settings: Settings, say: Callable[[str], None] | None) -> SparkSession:
    """A Spark session of this process's own; `say`: tell that no pipeline served the query,
    the faster ways, and how long the session took to start (most of such a query's time)."""
    from pyspark.sql import SparkSession

    from changelake.spark import session

    if say is not None and SparkSession.getActiveSession() is None:
        say(
            "no running pipeline serves this lake: starting a Spark session of this query's own"
            " (a streaming `changelake run` answers in a few seconds; Polars, DuckDB or"
            " delta-rs read the tables directly, docs/readers.md)"
        )
    started = time.monotonic()
    spark = session(settings, app="changelake-query")
    _quiet(spark)
    if say is not None and (took := time.monotonic() - started) > 1:  # not a warm one
        say(f"Spark started in {took:.1f} s")
    return spark


def run_query(
    settings: Settings,
    sql: str,
    max_rows: int = MAX_ROWS,
    as_of: AsOf | None = None,
    say: Callable[[str], None] = print,
) -> tuple[list[str], Rows]:
    """Column names and rows (Python values) of one SQL statement over the lake's views (as of
    one source transaction: see open_query)."""
    df, views = open_query(settings, sql, as_of=as_of, say=say)
    # One row past the cap tells "exactly max_rows" from "more than max_rows".
    rows = list(python_rows(df, views, max_rows + 1))
    if len(rows) > max_rows:
        raise ChangelakeError(
            f"the query returns more than {max_rows:,} rows to print",
            "add a LIMIT, a WHERE or an aggregate, or export it all: --csv, --json or --output "
            "FILE (streamed, any size)",
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


def python_rows(df: DataFrame, views: list[str], limit: int | None = None) -> Iterator[Values]:
    """The result's rows as plain tuples, a partition at a time (so any number of them), with
    every TIMESTAMP (also inside structs, arrays and maps) as a timezone-aware UTC datetime.

    PySpark turns a TIMESTAMP into a naive datetime in the *Python process's* local zone, which
    is lossy around DST changes. Cast to TIMESTAMP_NTZ in Spark (session zone UTC, see spark.py),
    it arrives as the exact UTC wall clock and gets its tzinfo back here. Columns are renamed by
    position first, so duplicate names (a join's two `id`s) cannot make the select ambiguous.
    """
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F

    renamed = df.toDF(*[f"c{i}" for i in range(len(df.columns))])
    types = [f.dataType for f in renamed.schema.fields]
    cols = [
        F.col(name).cast(_ntz(t)) if _ntz(t) != t else F.col(name)
        for name, t in zip(renamed.columns, types, strict=True)
    ]
    selected = renamed.select(cols)
    try:
        if limit is not None:
            got: Iterable[Any] = selected.limit(limit).collect()
        else:
            got = selected.toLocalIterator(prefetchPartitions=True)
        for row in got:
            yield tuple(_aware(v, t) for v, t in zip(row, types, strict=True))
    except PySparkException as exc:
        raise ChangelakeError(spark_message(exc), _tables_hint(views)) from None
    except Py4JJavaError as exc:  # a task failing under toLocalIterator: its cause is the news
        raise ChangelakeError(spark_message(root_cause(exc)), _tables_hint(views)) from None


def root_cause(exc: Py4JJavaError) -> str:
    """The innermost Java cause's message (a failed job wraps it in two layers of its own)."""
    cause, message = exc.java_exception, str(exc)
    while cause is not None:
        message = str(cause.getMessage() or message)
        cause = cause.getCause()
    return message


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


def spark_message(exc: BaseException | str) -> str:
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
