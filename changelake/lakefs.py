"""Files beside the lake (checkpoints, write probes) through Hadoop's FileSystem, so the same
code works for a local directory and for object storage on a cluster."""

from __future__ import annotations

import uuid
from typing import Any

from pyspark.sql import SparkSession

from changelake.exceptions import ConfigError


def _jclass(spark: SparkSession, name: str) -> Any:
    """A JVM class by its full name (one lookup per JVM: `jvm_lookups`)."""
    return getattr(spark._jvm, name)


def _fs(spark: SparkSession, path: str) -> tuple[Any, Any]:
    hpath = _jclass(spark, "org.apache.hadoop.fs.Path")(path)
    return hpath.getFileSystem(spark._jsc.hadoopConfiguration()), hpath


def exists(spark: SparkSession, path: str) -> bool:
    fs, hpath = _fs(spark, path)
    return bool(fs.exists(hpath))


def modified_ms(spark: SparkSession, path: str) -> int | None:
    """When the file at `path` was last written (ms since the epoch); None: no such file."""
    fs, hpath = _fs(spark, path)
    try:
        return int(fs.getFileStatus(hpath).getModificationTime())
    except Exception as exc:  # py4j wraps the JVM's FileNotFoundException
        if "FileNotFoundException" in str(exc):
            return None
        raise


def delete(spark: SparkSession, path: str) -> None:
    fs, hpath = _fs(spark, path)
    fs.delete(hpath, True)


def read_text(spark: SparkSession, path: str) -> str:
    fs, hpath = _fs(spark, path)
    stream = fs.open(hpath)
    try:
        return str(_jclass(spark, "org.apache.commons.io.IOUtils").toString(stream, "UTF-8"))
    finally:
        stream.close()


def names(spark: SparkSession, path: str) -> list[str]:
    """The names of the files and directories in the directory `path`."""
    fs, hpath = _fs(spark, path)
    return [str(status.getPath().getName()) for status in fs.listStatus(hpath)]


def rename(spark: SparkSession, source: str, target: str) -> None:
    """Move `source` to `target` (its parent directories created), or fail naming both."""
    fs, hsource = _fs(spark, source)
    _, htarget = _fs(spark, target)
    fs.mkdirs(htarget.getParent())
    if not fs.rename(hsource, htarget):
        raise ConfigError(f"cannot move {source} to {target}", "check the lake's permissions")


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
