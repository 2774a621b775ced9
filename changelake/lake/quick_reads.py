"""A Delta table read without Spark, with delta-rs (`deltalake`): what `status` reports, in tens
of milliseconds where starting a Spark JVM to ask takes 20-40 s.

Every table changelake writes is a plain Delta table (deletion vectors included), so delta-rs'
own reader sees what Spark sees: its newest commit's metadata from the log, and counts by
DataFusion SQL over the table as of that version. An s3a:// lake is reached with the same S3
settings the Spark session gets (`spark.s3a_conf`), named as delta-rs' object store names them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder
from deltalake.exceptions import DeltaError, TableNotFoundError

from changelake.exceptions import ChangelakeError, first_line
from changelake.lake.commits import LOOK_BACK, CommitMeta, newest_meta
from changelake.settings import Settings
from changelake.spark import s3a_conf

# Hadoop's S3A setting → delta-rs' storage option of the same meaning.
_S3_OPTIONS = {
    "endpoint": "AWS_ENDPOINT_URL",
    "endpoint.region": "AWS_REGION",
    "access.key": "AWS_ACCESS_KEY_ID",
    "secret.key": "AWS_SECRET_ACCESS_KEY",
}
FIRST_LOOK = 3  # commits read first for the newest metadata (an OPTIMIZE's commit records none)


def storage_options(settings: Settings, env: Mapping[str, str]) -> dict[str, str]:
    """delta-rs' options for the lake: for an s3a:// lake, what the Spark session's Hadoop
    configuration gets (endpoint, region, keys; plain HTTP and path-style addressing for a
    server of one's own); none for a local one."""
    if "://" not in settings.lake or settings.lake.startswith("file:"):
        return {}
    hadoop = {k.removeprefix("spark.hadoop.fs.s3a."): v for k, v in s3a_conf(settings, env).items()}
    options = {_S3_OPTIONS[k]: v for k, v in hadoop.items() if k in _S3_OPTIONS}
    if hadoop.get("connection.ssl.enabled") == "false":
        options["AWS_ALLOW_HTTP"] = "true"
    if hadoop.get("path.style.access") == "true":
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
    return options


def open_table(path: str, options: Mapping[str, str]) -> DeltaTable | None:
    """The table at its newest version (None: no Delta table there). A log that cannot be read
    (damaged, the store refusing) raises a ChangelakeError naming the path."""
    try:
        return DeltaTable(path, storage_options=dict(options))
    except TableNotFoundError:
        return None
    except (DeltaError, OSError) as exc:  # delta-rs appends a backtrace: its first line says it
        raise ChangelakeError(f"cannot read the Delta table at {path}: {first_line(exc)}") from exc


def newest(table: DeltaTable) -> tuple[int, CommitMeta | None]:
    """The table's version and the newest commit metadata at or before it (as
    `commits.latest_commit`): the last few commits first, the LOOK_BACK ones if none says."""
    meta = newest_meta(table.history(FIRST_LOOK))
    if meta is None:
        meta = newest_meta(table.history(LOOK_BACK))
    return table.version(), meta


def columns(table: DeltaTable) -> list[str]:
    return [f.name for f in table.schema().fields]


def count(table: DeltaTable) -> int:
    """The table's rows (deletion vectors applied)."""
    return int(one_row(table, "count(*) AS n")["n"])


def one_row(table: DeltaTable, select: str) -> dict[str, Any]:
    """`SELECT <select> FROM t` over the table, its one row (an aggregate's)."""
    rows = rows_of(table, f"SELECT {select} FROM t")
    return rows[0]


def rows_of(table: DeltaTable, sql: str) -> list[dict[str, Any]]:
    """The rows of `sql`, which reads the table as `t`."""
    result = QueryBuilder().register("t", table).execute(sql)
    # through Arrow's C stream, no copy (pa.table() would first import pandas to check for it)
    rows: list[dict[str, Any]] = pa.RecordBatchReader.from_stream(result).read_all().to_pylist()
    return rows


def quoted(name: str) -> str:
    """A column name as DataFusion SQL reads it (case and any character kept)."""
    return '"' + name.replace('"', '""') + '"'
