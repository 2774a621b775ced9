"""Merge-on-write: the newest change per key written into a base table at the cost of the changes,
not of the table, in ONE commit.

A MERGE (delta-spark's `ClassicMergeExecutor`) reads every column of every file it touches and
joins it with the changes to write them, deletion vectors or not; keys spread over a table touch
every file, so each compaction read the whole table. Here the old row of each changed key is
located by reading only the key, its LSN and the row's file and position (`_metadata.file_path`,
`_metadata.row_index`), of the files whose key statistics can hold a changed key; those rows are
marked deleted in deletion vectors, and the new versions are appended, in one transaction that
also records the application id and version (a replay is skipped whole) and the commit's
metadata. A reader sees the old rows or the new ones, never a key missing or twice.

Delta has no public API for this: delta-spark's own DML helpers build and store the deletion
vectors (`DeletionVectorBitmapGenerator`, `DMLWithDeletionVectorsHelper`, as its DELETE does) and
its `OptimisticTransaction` writes the new files and commits, reached through Spark's JVM gateway;
delta-spark is pinned in pom.xml and tests/integration/test_apply.py runs this against it.
"""

from __future__ import annotations

import struct
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from changelake.changelog.decode import LSN, OP, SOURCE_TS
from changelake.changelog.plan import Truncate
from changelake.lake.commits import CommitMeta
from changelake.lake.layout import APPENDED_OFTEN, DELETED, DELETED_AT, SOFT_COLUMNS, q

# Columns of the located rows (named so that no table column can clash).
_FILE, _ROW, _OLD_LSN, _NEW_LSN = "__cl_file", "__cl_row", "__cl_old_lsn", "__cl_new_lsn"
# At most this many key ranges prune the files read: one per run of close keys of the changes,
# so a round of inserts at the end and updates of recent rows reads the few files holding them.
MOST_RANGES = 32
DV_PROPERTY = "delta.enableDeletionVectors"
BASE_PROPERTIES = {DV_PROPERTY: "true", **APPENDED_OFTEN}
_STORAGE = "org.apache.spark.sql.delta.storage.dv"


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
    jvm = _Jvm(spark)
    txn = jvm.transaction(target.path)
    if txn.txnVersion(app_id) >= version:
        return False
    if lacking := _lacking_properties(txn):  # a table made before they were the rule
        listed = ", ".join(f"'{k}' = '{v}'" for k, v in lacking.items())
        spark.sql(f"ALTER TABLE delta.{q(target.path)} SET TBLPROPERTIES ({listed})")
        txn = jvm.transaction(target.path)
    table = spark.read.format("delta").option("versionAsOf", txn.readVersion()).load(target.path)
    held: list[DataFrame] = [rows.persist()]
    try:
        gone, stale = _located(table, held[0], target.key)
        new = _new_versions(table, held[0], stale, target)
        if truncate is not None:
            wiped = _with_position(table).where(F.col(LSN) < F.lit(int(truncate.lsn))).persist()
            held.append(wiped)
            for row in wiped.select(_FILE, _ROW).collect():
                gone[row[_FILE]].add(int(row[_ROW]))
            if target.soft_delete:
                new = new.unionByName(_soft_truncated(wiped, held[0], truncate, target))
        actions = jvm.deletion_vectors(txn, {f: sorted(p) for f, p in gone.items()})
        written = txn.writeFiles(_shaped(new, table.schema)._jdf)
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


def _located(
    table: DataFrame, changes: DataFrame, key: Sequence[str]
) -> tuple[defaultdict[str, set[int]], DataFrame]:
    """The positions (file URI → row positions) of the rows a newer change replaces, and the
    keys whose change is not newer than the table's row (a replay: nothing to write). Reads the
    key and LSN columns alone, of the files whose statistics can hold a changed key."""
    wanted = changes.select(*key, F.col(LSN).alias(_NEW_LSN))
    scanned = table.where(_key_ranges(changes, key)) if len(key) == 1 else table
    found = scanned.select(
        *key,
        F.col(LSN).alias(_OLD_LSN),
        F.col("_metadata.file_path").alias(_FILE),
        F.col("_metadata.row_index").alias(_ROW),
    ).join(F.broadcast(wanted), list(key))
    gone: defaultdict[str, set[int]] = defaultdict(set)
    stale = []
    for row in found.collect():
        if row[_NEW_LSN] > row[_OLD_LSN]:
            gone[row[_FILE]].add(int(row[_ROW]))
        else:
            stale.append(tuple(row[k] for k in key))
    spark = changes.sparkSession
    return gone, spark.createDataFrame(stale, changes.select(*key).schema)


def _key_ranges(changes: DataFrame, key: Sequence[str]) -> Column:
    """A predicate Delta's data skipping reads: the changed keys as at most MOST_RANGES ranges,
    split where consecutive keys lie furthest apart (numbers) or evenly (anything else)."""
    column = key[0]
    values = sorted(r[0] for r in changes.select(column).distinct().collect() if r[0] is not None)
    if not values:
        return F.lit(False)
    cuts = range_cuts(values)
    bounds = zip([0, *cuts], [*cuts, len(values)], strict=True)
    ranges = [F.col(column).between(values[a], values[b - 1]) for a, b in bounds]
    found = ranges[0]
    for each in ranges[1:]:
        found = found | each
    return found


def range_cuts(values: list[Any]) -> list[int]:
    """Where sorted `values` split into at most MOST_RANGES runs (each run's first index)."""
    if len(values) <= MOST_RANGES:
        return list(range(1, len(values)))
    if all(isinstance(v, int | float) for v in values):
        gaps = sorted(range(1, len(values)), key=lambda i: values[i] - values[i - 1])
        return sorted(gaps[-(MOST_RANGES - 1) :])
    step = len(values) / MOST_RANGES
    return [round(step * i) for i in range(1, MOST_RANGES)]


def _new_versions(
    table: DataFrame, changes: DataFrame, stale: DataFrame, target: Target
) -> DataFrame:
    """The rows to append: each change newer than the table's row for its key (or for a key it
    lacks) that is not a delete, carrying over the columns it lacks (a column dropped at the
    source keeps its last values, as a MERGE's update kept it); on a soft-delete table, a delete
    is a new version of its row marked deleted."""
    key = list(target.key)
    fresh = changes.join(F.broadcast(stale), key, "left_anti")
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


def _name(uri: str) -> str:
    """A data file's name, as its AddFile (relative) and `_metadata.file_path` (a URI) end."""
    return uri.rsplit("/", 1)[-1]


class _Jvm:
    """delta-spark's transaction and deletion-vector helpers, through Spark's JVM gateway."""

    def __init__(self, spark: SparkSession):
        self.spark = spark
        self.jvm: Any = spark.sparkContext._jvm
        self.session: Any = spark._jsparkSession

    def _object(self, name: str) -> Any:
        """A Scala object, from the loader that holds the Delta jars (`spark.jars`)."""
        loader = self.jvm.java.lang.Thread.currentThread().getContextClassLoader()
        found = self.jvm.java.lang.Class.forName(f"{name}$", True, loader)
        return found.getField("MODULE$").get(None)

    def as_list(self, seq: Any) -> Any:
        """A Scala Seq as a java.util.List."""
        return self.jvm.scala.jdk.javaapi.CollectionConverters.asJava(seq)

    def as_seq(self, items: Any) -> Any:
        """A java.util.List as a Scala immutable Seq."""
        return self.jvm.scala.jdk.javaapi.CollectionConverters.asScala(items).toList()

    def some(self, value: Any) -> Any:
        return self.jvm.scala.Some(value)

    def transaction(self, path: str) -> Any:
        log = self._object("org.apache.spark.sql.delta.DeltaLog").forTable(self.session, path)
        return log.startTransaction()

    def deletion_vectors(self, txn: Any, gone: dict[str, list[int]]) -> Any:
        """The file actions that mark the rows `gone` names (file URI → positions) deleted:
        each file touched re-added with its deletion vector (merged with the one it had), or
        removed when none of its rows is left. Built here in the driver, from the transaction's
        own view of the files (with their statistics): no Spark job for a few bitmaps."""
        actions = self.jvm.java.util.ArrayList()
        if not gone:
            return actions
        # Every file, with its row count (what a deletion vector's file must state): the whole
        # table read, so a concurrent rewrite of it (OPTIMIZE) conflicts instead of losing a mark.
        files = txn.filterFiles(self.as_seq(self.jvm.java.util.ArrayList()), True)
        by_name = {_name(str(f.path())): f for f in (files.apply(i) for i in range(files.size()))}
        table = txn.deltaLog().dataPath()
        store = self._object(f"{_STORAGE}.DeletionVectorStore").createInstance(
            txn.deltaLog().newDeltaHadoopConf()
        )
        stored = self._object("org.apache.spark.sql.delta.deletionvectors.StoredBitmap")
        portable = self._object(
            "org.apache.spark.sql.delta.deletionvectors.RoaringBitmapArrayFormat"
        ).Portable()
        descriptor = self._object("org.apache.spark.sql.delta.actions.DeletionVectorDescriptor")
        file_id = self.jvm.java.util.UUID.randomUUID()
        writer = store.createWriter(
            store.generateFileNameInTable(store.pathWithFileSystem(table), file_id, "")
        )
        now = int(time.time() * 1000)
        try:
            for uri, positions in sorted(gone.items()):
                add = by_name[_name(uri)]
                bitmap = self._bitmap(positions)
                if add.deletionVector() is not None:
                    had = stored.create(add.deletionVector(), table).load(store)
                    had.merge(bitmap)
                    bitmap = had
                count = bitmap.cardinality()
                rows = add.numPhysicalRecords()
                if rows.isDefined() and int(rows.get()) == count:  # nothing of it is left
                    actions.add(add.removeWithTimestamp(now, True))
                    continue
                data = bitmap.serializeAsByteArray(portable)
                where = writer.write(data)
                dv = descriptor.onDiskWithRelativePath(
                    file_id, "", len(data), count, self.some(where.offset()), self._none()
                )
                changed = add.removeRows(dv, True, getattr(add, "removeRows$default$3")())
                actions.add(changed._1())
                actions.add(changed._2())
        finally:
            writer.close()
        return actions

    def _bitmap(self, positions: list[int]) -> Any:
        """Row positions as Delta's RoaringBitmapArray, passed as one byte array (one call to
        the JVM, not one per position)."""
        packed = struct.pack(f">{len(positions)}q", *positions)
        longs = self.jvm.java.nio.ByteBuffer.wrap(bytearray(packed)).asLongBuffer()
        gateway = self.spark.sparkContext._gateway
        assert gateway is not None  # a classic session's driver always has it
        values = gateway.new_array(self.jvm.long, len(positions))
        longs.get(values)
        seq = self.jvm.scala.collection.immutable.ArraySeq.unsafeWrapArray(values)
        return self._object("org.apache.spark.sql.delta.deletionvectors.RoaringBitmapArray").apply(
            seq
        )

    def _none(self) -> Any:
        return self._object("scala.None")

    def write_operation(self, user_metadata: str) -> Any:
        """The commit's operation: an append (what readers' history shows) with our metadata."""
        write = getattr(self.jvm.org.apache.spark.sql.delta, "DeltaOperations$Write")
        none = self._none()
        append = self.jvm.org.apache.spark.sql.SaveMode.Append
        some_meta = self.some(user_metadata)
        return write(append, none, none, some_meta, none, none, none, none, none)
