"""verify of a history view: its current versions must be the table's rows, row for row (each
with the LSN of the change that made it), as `verify` has just proved the table equal to the
source. What the views promise for past versions is proved by the unit tests' replays."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.changelog.decode import LSN, OP, SOURCE_TS
from pipelines.read.history import read_history
from pipelines.read.table import read_table
from pipelines.read.verify.diff import SAMPLE, Differences
from pipelines.sinks.delta import DELETED, DELETED_AT, delta_exists
from pipelines.tables import TableRef
from pipelines.views.history import CURRENT, VALID_FROM_LSN

_NOT_DATA = (LSN, OP, SOURCE_TS, DELETED, DELETED_AT)


def check_history(spark: SparkSession, ref: TableRef, lake: str) -> Differences:
    found = Differences("delta")
    path = ref.path(lake)
    history = read_history(spark, path) if delta_exists(spark, path) else None
    if history is None:
        found.samples.append("no history yet (it starts when `run` prepares the table)")
        return found
    read = read_table(spark, path, ref.soft_delete)
    data = [c for c in read.rows.columns if c not in _NOT_DATA]
    table = read.live().select(*data, F.col(LSN).alias("_lsn")).persist()
    versions = history.where(F.col(CURRENT)).select(*data, F.col(VALID_FROM_LSN).alias("_lsn"))
    try:
        found.rows = table.count()
        _add(found, "missing", table.exceptAll(versions), read.meta.key if read.meta else ())
        _add(found, "extra", versions.exceptAll(table), read.meta.key if read.meta else ())
    finally:
        table.unpersist()
    return found


def _add(found: Differences, kind: str, rows: DataFrame, key: tuple[str, ...]) -> None:
    rows = rows.persist()
    try:
        count = rows.count()
        setattr(found, kind, count)
        for row in rows.select(*key, "_lsn").limit(SAMPLE).collect():
            found.samples.append(f"{kind} current version {tuple(row)[:-1]} at LSN {row[-1]}")
    finally:
        rows.unpersist()
