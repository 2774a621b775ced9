"""A table's data files read from the driver, with pyarrow: a few columns of a few files, where a
Spark job's fixed cost would be most of the work (merge-on-write's locate).

The lake is a local path or an `s3a://` URL (docs/configuration.md); an S3 lake is reached with
the settings the Spark session's Hadoop configuration already holds (`spark.s3a_conf`), so the
driver and the executors read it alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs
from pyspark.sql import SparkSession

Reader = Callable[[str, Sequence[str]], pa.Table]


def reader(spark: SparkSession, table_uri: str) -> Reader:
    """Reads `columns` of a Parquet file of the table at `table_uri` (a file's URI as the
    transaction names it)."""
    parsed = urlparse(table_uri)
    if parsed.scheme in ("", "file"):
        local = fs.LocalFileSystem()
        return lambda uri, columns: pq.read_table(
            urlparse(uri).path, columns=list(columns), filesystem=local
        )
    if parsed.scheme in ("s3a", "s3"):
        remote = _s3(spark)
        return lambda uri, columns: pq.read_table(
            _bucket_path(uri), columns=list(columns), filesystem=remote
        )
    raise ValueError(f"the lake {table_uri} is neither a local path nor an s3a:// URL")


def _bucket_path(uri: str) -> str:
    parsed = urlparse(uri)
    return f"{parsed.netloc}{parsed.path}"


def _s3(spark: SparkSession) -> fs.S3FileSystem:
    """S3 as the session's S3A settings reach it (no keys set: the AWS default chain)."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()

    def get(name: str) -> str | None:
        found = conf.get(f"fs.s3a.{name}")
        return str(found) if found else None

    endpoint = get("endpoint")
    options: dict[str, object] = {}
    if endpoint:
        parsed = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
        options["endpoint_override"] = parsed.netloc
        options["scheme"] = parsed.scheme
        options["force_virtual_addressing"] = get("path.style.access") != "true"
    if region := get("endpoint.region"):
        options["region"] = region
    if (key := get("access.key")) and (secret := get("secret.key")):
        options["access_key"], options["secret_key"] = key, secret
    return fs.S3FileSystem(**options)
