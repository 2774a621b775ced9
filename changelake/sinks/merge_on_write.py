"""Merge-on-write: the newest change per key written into a base table at the cost of the changes,
not of the table, in ONE commit.

A MERGE (delta-spark's `ClassicMergeExecutor`) reads every column of every file it touches and
joins it with the changes to write them, deletion vectors or not; keys spread over a table touch
every file, so each write would read the whole table. Here the old row of each changed key is
located by reading only the key and LSN columns of the files whose key statistics can hold a
changed key, from the driver (`key_locate.py`); those rows are marked deleted in deletion
vectors, and the new versions are appended, in one transaction that also records the application
id and version (a replay is skipped whole) and the commit's metadata. A reader sees the old rows
or the new ones, never a key missing or twice.

Delta has no public API for this: delta-spark's own classes build and store the deletion vectors
and its `OptimisticTransaction` writes the new files and commits (`delta_jvm.py`);
tests/unit/test_base_writes.py and tests/integration/test_apply.py run this against them.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from changelake.changelog.decode import LSN, OP, SOURCE_TS
from changelake.changelog.plan import Truncate
from changelake.lake.commits import CommitMeta
from changelake.lake.driver_files import reader
from changelake.lake.layout import APPENDED_OFTEN, DELETED, DELETED_AT, SOFT_COLUMNS, q
from changelake.sinks.delta_jvm import DeltaJvm, name_of
from changelake.sinks.key_locate import locate

# Columns of a truncate's wiped rows (named so that no table column can clash).
_FILE, _ROW = "__cl_file", "__cl_row"
DV_PROPERTY = "delta.enableDeletionVectors"
BASE_PROPERTIES = {DV_PROPERTY: "true", **APPENDED_OFTEN}


@dataclass(frozen=True)
class Target:
    """A base table as merge-on-write writes it."""

    path: str
    key: tuple[str, ...]
    soft_delete: bool


def write_changes(
    target: Target,
    rows: DataFrame,
    truncate: Truncate | None,
    meta: CommitMeta,
    app_id: str,
    version: int,
) -> bool:
    """Apply `rows` (the newest change per key, complete, LSN-guarded) and `truncate` (one the
    rows come after, not applied yet) in one commit, idempotent by (`app_id`, `version`).
    False when that version was committed already (a repeat after a crash)."""
    spark = rows.sparkSession
    jvm = DeltaJvm(spark)
    txn = jvm.transaction(target.path)
    if jvm.committed(txn, app_id) >= version:
        return False
    if lacking := _lacking_properties(txn):  # a table made before they were the rule
        listed = ", ".join(f"'{k}' = '{v}'" for k, v in lacking.items())
        spark.sql(f"ALTER TABLE delta.{q(target.path)} SET TBLPROPERTIES ({listed})")
        txn = jvm.transaction(target.path)
    table = spark.read.format("delta").option("versionAsOf", txn.readVersion()).load(target.path)
    files = {file.name: file for file in jvm.files(txn)}
    held: list[DataFrame] = [rows.persist()]
    try:
        changed = held[0].select(*target.key, LSN).toArrow()
        read = reader(spark, str(txn.deltaLog().dataPath().toString()))
        marked = lambda file: jvm.positions(jvm.marked(txn, file))  # noqa: E731
        located = locate(list(files.values()), changed, target.key, read, marked)
        gone = defaultdict(set, {name: set(at) for name, at in located.gone.items()})
        new = _new_versions(table, held[0], located.stale, target)
        if truncate is not None:
            wiped = _with_position(table).where(F.col(LSN) < F.lit(int(truncate.lsn))).persist()
            held.append(wiped)
            for row in wiped.select(_FILE, _ROW).collect():
                gone[name_of(row[_FILE])].add(int(row[_ROW]))
            if target.soft_delete:
                new = new.unionByName(_soft_truncated(wiped, held[0], truncate, target))
        actions = jvm.deletion_vectors(txn, files, {f: sorted(p) for f, p in gone.items()})
        # One file per write: a round's changes are small, and every file is one more to read.
        # Coalesced when they come from the changes alone (held), else repartitioned: a
        # coalesce would also make the table's scans (carried columns, soft deletes) one task.
        carried = set(table.columns) - set(rows.columns) - set(SOFT_COLUMNS)
        one = new.repartition(1) if target.soft_delete or carried else new.coalesce(1)
        written = txn.writeFiles(_shaped(one, table.schema)._jdf)
    finally:
        for frame in held:
            frame.unpersist()
    actions.addAll(jvm.as_list(written))
    txn.updateSetTransaction(app_id, version, jvm.some(int(time.time() * 1000)))
    txn.commit(jvm.as_seq(actions), jvm.write_operation(meta.to_json()))
    return True


def _lacking_properties(txn: Any) -> dict[str, str]:
    """The BASE_PROPERTIES the table's metadata does not hold (as the transaction read it)."""
    held = txn.metadata().configuration()
    lacking = {}
    for key, value in BASE_PROPERTIES.items():
        found = held.get(key)
        if not found.isDefined() or str(found.get()).lower() != value:
            lacking[key] = value
    return lacking


def _with_position(table: DataFrame) -> DataFrame:
    """The table's rows with the file and position each is stored at."""
    return table.select(
        "*",
        F.col("_metadata.file_path").alias(_FILE),
        F.col("_metadata.row_index").alias(_ROW),
    )


def _new_versions(
    table: DataFrame, changes: DataFrame, stale: list[tuple[Any, ...]], target: Target
) -> DataFrame:
    """The rows to append: each change newer than the table's row for its key (or for a key it
    lacks) that is not a delete, carrying over the columns it lacks (a column dropped at the
    source keeps its last values, as a MERGE's update kept it); on a soft-delete table, a delete
    is a new version of its row marked deleted."""
    key = list(target.key)
    fresh = changes
    if stale:
        replayed = changes.sparkSession.createDataFrame(stale, changes.select(*key).schema)
        fresh = changes.join(F.broadcast(replayed), key, "left_anti")
    carried = [c for c in table.columns if c not in changes.columns and c not in SOFT_COLUMNS]
    upserts = fresh.where(F.col(OP) != "d")
    if carried:
        old = table.join(F.broadcast(upserts.select(*key)), key).select(*key, *carried)
        upserts = upserts.join(old, key, "left")
    if not target.soft_delete:
        return upserts
    upserts = upserts.withColumn(DELETED, F.lit(False))
    upserts = upserts.withColumn(DELETED_AT, F.lit(None).cast("timestamp"))
    deletes = fresh.where(F.col(OP) == "d").select(*key, LSN, OP, SOURCE_TS)
    kept = [c for c in table.columns if c not in deletes.columns and c not in SOFT_COLUMNS]
    old = table.join(F.broadcast(deletes.select(*key)), key).select(*key, *kept)
    marked = deletes.join(old, key).withColumn(DELETED, F.lit(True))
    marked = marked.withColumn(DELETED_AT, F.col(SOURCE_TS))
    return upserts.unionByName(marked, allowMissingColumns=True)


def _soft_truncated(
    wiped: DataFrame, changes: DataFrame, truncate: Truncate, target: Target
) -> DataFrame:
    """On a soft-delete table, the rows a truncate wiped that no change replaces (every change
    comes after the truncate, so a changed key's row is replaced), marked deleted at the
    truncate's time (those marked already keep their first time)."""
    key = list(target.key)
    kept = wiped.join(F.broadcast(changes.select(*key)), key, "left_anti")
    at = F.lit(truncate.source_ts).cast("timestamp")
    newly = F.when(F.col(DELETED), F.col(DELETED_AT)).otherwise(at)
    return kept.drop(_FILE, _ROW).withColumn(DELETED_AT, newly).withColumn(DELETED, F.lit(True))


def _shaped(rows: DataFrame, schema: T.StructType) -> DataFrame:
    """`rows` as the table's columns, in its order and types (a column it lacks is null)."""
    return rows.select(
        *(
            (F.col(q(f.name)) if f.name in rows.columns else F.lit(None))
            .cast(f.dataType)
            .alias(f.name)
            for f in schema.fields
        )
    )
