"""Files beside the lake (checkpoints, write probes) through Hadoop's FileSystem, so the same
code works for a local directory and for object storage on a cluster."""

from __future__ import annotations

import uuid
from typing import Any

from pyspark.sql import SparkSession

from pipelines.exceptions import ConfigError


def _fs(spark: SparkSession, path: str) -> tuple[Any, Any]:
    jvm = spark._jvm
    assert jvm is not None
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    return hpath.getFileSystem(spark._jsc.hadoopConfiguration()), hpath


def exists(spark: SparkSession, path: str) -> bool:
    fs, hpath = _fs(spark, path)
    return bool(fs.exists(hpath))


def delete(spark: SparkSession, path: str) -> None:
    fs, hpath = _fs(spark, path)
    fs.delete(hpath, True)


def write_text(spark: SparkSession, path: str, text: str) -> None:
    fs, hpath = _fs(spark, path)
    stream = fs.create(hpath, True)
    try:
        stream.write(bytearray(text.encode()))
    finally:
        stream.close()


def ensure_writable(spark: SparkSession, path: str, what: str) -> None:
    """Fail now, naming the path, rather than in the middle of a batch."""
    probe = f"{path.rstrip('/')}/.changelake-write-probe-{uuid.uuid4().hex[:8]}"
    try:
        fs, hpath = _fs(spark, path)
        fs.mkdirs(hpath)
        write_text(spark, probe, "ok")
        delete(spark, probe)
    except Exception as exc:  # py4j wraps the JVM's IOException; its text names the cause
        reason = str(exc).splitlines()[0][:300]
        raise ConfigError(
            f"the {what} directory {path} is not writable: {reason}",
            f"fix its permissions, or point CHANGELAKE_{what.upper()} somewhere writable",
        ) from exc
