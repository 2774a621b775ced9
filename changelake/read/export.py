"""`changelake query --csv | --json | --output FILE`: a result of any size, streamed.

CSV and JSON rows go out a partition at a time (never the whole result in memory) to stdout or
to a file; Parquet is written by Spark itself, as one file. A file appears only complete: it is
written beside its destination and renamed into place, so a failed query leaves nothing
half-written under that name.
"""

from __future__ import annotations

import shutil
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from changelake.exceptions import ChangelakeError, ConfigError
from changelake.read.formats import unique_names, write_csv, write_json
from changelake.read.query import open_query, python_rows, root_cause, spark_message
from changelake.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from changelake.read.as_of import AsOf

FORMATS = ("csv", "json", "parquet")
Say = Callable[[str], None]


def format_of(chosen: str | None, output: Path | None) -> str:
    """The export format: as chosen, else from the output file's suffix."""
    if chosen:
        return chosen
    suffix = output.suffix.lstrip(".").lower() if output else ""
    if suffix not in FORMATS:
        raise ConfigError(
            f"--output {output}: cannot tell the format from {output.suffix or 'no suffix'!r}"
            if output
            else "no export format",
            f"name the file .csv, .json or .parquet, or pass --{' / --'.join(FORMATS)}",
        )
    return suffix


def export(
    settings: Settings,
    sql: str,
    fmt: str,
    output: Path | None,
    say: Say = print,
    as_of: AsOf | None = None,
) -> int:
    """Run `sql` (as of one source transaction, with `as_of`) and write its result as `fmt` to
    `output` (stdout when None); returns the rows."""
    if fmt == "parquet" and output is None:
        raise ConfigError("--parquet needs --output FILE (Parquet is not for a terminal)")
    df, views = open_query(settings, sql, served=fmt != "parquet", as_of=as_of, say=say)
    if output is None:
        return _write_text(df, views, fmt, sys.stdout)
    tmp = output.with_name(f".{output.name}.{uuid.uuid4().hex[:8]}.tmp")
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        if fmt == "parquet":
            count = _write_parquet(df, tmp)
        else:
            with tmp.open("w", encoding="utf-8", newline="") as out:
                count = _write_text(df, views, fmt, out)
        tmp.replace(output)
    finally:
        if tmp.is_dir():
            shutil.rmtree(tmp)
        tmp.unlink(missing_ok=True)
    say(f"wrote {count:,} rows to {output}")
    return count


def _write_text(df: DataFrame, views: list[str], fmt: str, out: TextIO) -> int:
    rows = python_rows(df, views)
    if fmt == "csv":
        return write_csv(list(df.columns), rows, out)
    return write_json(list(df.columns), rows, out)


def _write_parquet(df: DataFrame, target: Path) -> int:
    """One Parquet file at `target`, written by Spark (types kept, timestamps as UTC instants)."""
    import pyarrow.parquet as pq
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    parts = target.with_name(target.name + ".parts")
    try:
        # Parquet refuses a repeated column name (a join's two `id`s): id, id_2, as in JSON.
        named = df.toDF(*unique_names(df.columns)).coalesce(1)
        # Parquet's own timestamp type (Spark's default, INT96, is deprecated in Parquet).
        named.sparkSession.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        named.write.mode("overwrite").parquet(str(parts))
        (part,) = parts.glob("part-*.parquet")
        part.replace(target)
        return int(pq.ParquetFile(target).metadata.num_rows)  # from the footer: no scan
    except PySparkException as exc:
        raise ChangelakeError(spark_message(exc)) from None
    except Py4JJavaError as exc:  # a failed write job arrives unwrapped
        raise ChangelakeError(spark_message(root_cause(exc))) from None
    finally:
        shutil.rmtree(parts, ignore_errors=True)
