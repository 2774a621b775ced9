"""A Delta table's newest version and commit information, read from its `_delta_log` files.

`DeltaTable.history()` answers the same with a Spark job over the last commits (0.3 to 2.5 s on
a busy pipeline); every reader of a table asks it, and the running pipeline asks it whenever it
serves a new version to queries. Commit files are what Delta itself reads: `_last_checkpoint`
says where the newest checkpoint is, the commits after it are found by probing `<version>.json`
upwards (`last_present`), and a commit's `commitInfo` line holds its userMetadata and operation
metrics.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from changelake import lakefs


def log_dir(path: str) -> str:
    return f"{path.rstrip('/')}/_delta_log"


def commit_file(path: str, version: int) -> str:
    return f"{log_dir(path)}/{version:020d}.json"


def newest_version(spark: SparkSession, path: str, known: int = -1) -> int:
    """The table's newest committed version (-1: no commit). `known`: a version already seen,
    to probe on from (the running pipeline's views ask every half second)."""
    if known >= 0 and lakefs.exists(spark, commit_file(path, known)):
        version = known
    else:  # first look, or the table was deleted (and maybe made again) since
        version = _checkpointed(spark, path)
    return last_present(lambda v: lakefs.exists(spark, commit_file(path, v)), version)


def last_present(present: Callable[[int], bool], start: int) -> int:
    """The last version `present` says is there, of the run of consecutive versions that
    continues `start` (present, or -1). Commits after a checkpoint are consecutive, and a
    long-lived table may be hundreds past one (a base table checkpoints seldom): steps doubling
    until one is missing, then halving back, take ~2 log2(n) probes rather than n."""
    found, step = start, 1
    while present(found + step):
        found, step = found + step, step * 2
    missing = found + step
    while missing - found > 1:
        middle = (found + missing) // 2
        found, missing = (middle, missing) if present(middle) else (found, middle)
    return found


def stamp(spark: SparkSession, path: str, known: int = -1) -> tuple[int, int]:
    """The newest version and when its commit was written: a table made again (a resnapshot)
    up to the same version still reads as changed."""
    version = newest_version(spark, path, known)
    written = lakefs.modified_ms(spark, commit_file(path, version)) if version >= 0 else None
    return version, written or 0


def commit_info(spark: SparkSession, path: str, version: int) -> dict[str, Any] | None:
    """The `commitInfo` of one commit (None: the commit file is gone or has none)."""
    try:
        text = lakefs.read_text(spark, commit_file(path, version))
    except Py4JJavaError as exc:
        if "FileNotFoundException" in str(exc):  # removed by log cleanup: nothing to tell
            return None
        raise  # an unreadable log must not pass for an older commit's metadata
    for line in text.splitlines():
        info = json.loads(line).get("commitInfo") if line.strip() else None
        if isinstance(info, dict):
            return info
    return None


def _checkpointed(spark: SparkSession, path: str) -> int:
    try:
        doc = json.loads(lakefs.read_text(spark, f"{log_dir(path)}/_last_checkpoint"))
    except (Py4JJavaError, ValueError):  # no checkpoint written yet, or caught mid-write
        return -1
    return int(doc.get("version", -1)) if isinstance(doc, dict) else -1
