"""A table's data files read from the driver, with pyarrow: a few columns of a few files, where a
Spark job's fixed cost would be most of the work (merge-on-write's locate).

The lake is a local path or an `s3a://` URL (docs/configuration.md); an S3 lake is reached with
the settings the Spark session's Hadoop configuration already holds (`spark.s3a_conf`, or a
bucket's own `fs.s3a.bucket.<bucket>.*`), so the driver and the executors read it alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs
from pyspark.sql import SparkSession

# Reads the named columns of one data file (by its URI); a column the file lacks (one added to
# the table after the file was written) is left out of what it returns.
Reader = Callable[[str, Sequence[str]], pa.Table]
_SCHEMES = ("s3a://", "s3://")


def reader(spark: SparkSession, table_uri: str) -> Reader:
    """Reads columns of the Parquet files of the table at `table_uri` (their URIs as the
    transaction names them, decoded: a name may hold `#` or `?`, so no URL parsing)."""
    if table_uri.startswith(_SCHEMES):
        bucket = table_uri.split("://", 1)[1].split("/", 1)[0]
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        remote = fs.S3FileSystem(**s3_options(lambda key: conf.get(key), bucket))
        return lambda uri, columns: _read(remote, uri.split("://", 1)[1], columns)
    if "://" in table_uri and not table_uri.startswith("file://"):
        raise ValueError(f"the lake {table_uri} is neither a local path nor an s3a:// URL")
    return read_local


def read_local(uri: str, columns: Sequence[str]) -> pa.Table:
    """A local file's columns (`file:/a`, `file:///a` or `/a`)."""
    return _read(fs.LocalFileSystem(), _local_path(uri), columns)


def _local_path(uri: str) -> str:
    """`file:/a`, `file:///a` or `/a` as `/a`."""
    path = uri.removeprefix("file:")
    return "/" + path.lstrip("/") if path.startswith("//") else path


def _read(filesystem: fs.FileSystem, path: str, columns: Sequence[str]) -> pa.Table:
    # Spark writes timestamps as INT96: read as microseconds (Spark's own unit), since pyarrow's
    # default (nanoseconds) wraps a date outside 1677-2262, such as a 9999-12-31 sentinel.
    with filesystem.open_input_file(path) as handle:
        stored = pq.ParquetFile(handle, coerce_int96_timestamp_unit="us")
        present = set(stored.schema_arrow.names)
        return stored.read(columns=[c for c in columns if c in present])


def s3_options(setting: Callable[[str], Any], bucket: str) -> dict[str, Any]:
    """pyarrow's S3FileSystem options for `bucket`, from Hadoop's S3A settings (`setting(key)`:
    a value or None): a bucket's own setting first; no keys: the AWS default chain; no region:
    the bucket's, as S3A finds it."""

    def get(name: str) -> str | None:
        for key in (f"fs.s3a.bucket.{bucket}.{name}", f"fs.s3a.{name}"):
            if found := setting(key):
                return str(found)
        return None

    options: dict[str, Any] = {}
    if endpoint := get("endpoint"):
        secure = get("connection.ssl.enabled") != "false"
        scheme, _, host = endpoint.rpartition("://")
        options["endpoint_override"] = host.rstrip("/")
        options["scheme"] = scheme or ("https" if secure else "http")
        options["force_virtual_addressing"] = get("path.style.access") != "true"
    if region := get("endpoint.region") or get("region"):
        options["region"] = region
    elif not endpoint:
        options["region"] = fs.resolve_s3_region(bucket)
    if (key := get("access.key")) and (secret := get("secret.key")):
        options["access_key"], options["secret_key"] = key, secret
        if token := get("session.token"):
            options["session_token"] = token
    return options
