"""delta-spark's transaction and deletion-vector helpers, reached through Spark's JVM gateway, for
merge-on-write (`merge_on_write.py`): the table's files as a transaction reads them, the rows a
file's deletion vector marks, new deletion vectors, and the commit's operation.

Delta has no public API for writing deletion vectors beside new rows in one commit: delta-spark's
own DML writes them through these classes (`DeletionVectorStore`, `RoaringBitmapArray`,
`AddFile.removeRows`, `OptimisticTransaction`), pinned by pom.xml.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import numpy as np
from pyspark.sql import SparkSession

_STORAGE = "org.apache.spark.sql.delta.storage.dv"
_DV = "org.apache.spark.sql.delta.deletionvectors"


@dataclass(frozen=True)
class DataFile:
    """One data file of the table, as the transaction read it."""

    name: str  # the file's name: the last part of its path (unique in a table)
    uri: str  # where it is stored
    rows: int | None  # rows stored in it, deleted ones too (None: not recorded)
    low: Mapping[str, Any]  # each column's smallest value, from the file's statistics
    high: Mapping[str, Any]  # and its largest (a column without statistics is absent)
    add: Any  # the JVM's AddFile

    @property
    def has_deletions(self) -> bool:
        return self.add.deletionVector() is not None


def name_of(uri: str) -> str:
    """A data file's name, as its AddFile's path and `_metadata.file_path` both end."""
    return unquote(uri.rsplit("/", 1)[-1])


class DeltaJvm:
    """delta-spark's classes for one write, through the session's JVM gateway."""

    def __init__(self, spark: SparkSession):
        self.spark = spark
        self.jvm: Any = spark.sparkContext._jvm
        self.session: Any = spark._jsparkSession
        self._store: Any = None
        self._marked: dict[str, Any] = {}  # deletion vectors loaded in this transaction

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

    def none(self) -> Any:
        return self._object("scala.None")

    def transaction(self, path: str) -> Any:
        log = self._object("org.apache.spark.sql.delta.DeltaLog").forTable(self.session, path)
        self._store, self._marked = None, {}
        return log.startTransaction()

    def committed(self, txn: Any, app_id: str) -> int:
        """The newest version of `app_id` the table holds (-1: none), as `txn` read it: from
        the version's checksum file when it lists them (delta-spark writes them there, but 4.4
        reads them back only through a reconstruction of the table's state: a Spark job of
        ~2 s on a 1M-row table), else from Delta's state."""
        checksum = txn.snapshot().checksumOpt()
        if checksum.isDefined() and checksum.get().setTransactions().isDefined():
            # As `txnVersion` would: a concurrent commit of the same id then conflicts.
            txn.readTxn().addOne(app_id)
            held = checksum.get().setTransactions().get()
            for each in (held.apply(i) for i in range(held.size())):
                if str(each.appId()) == app_id:
                    return int(each.version())
            return -1
        return int(txn.txnVersion(app_id))

    def files(self, txn: Any) -> list[DataFile]:
        """Every data file of the table with its statistics, as `txn` read it: from the
        version's checksum file when it lists them (`spark.FILES_IN_CHECKSUM`), else by a
        Spark job over Delta's state; the transaction is marked as reading the whole table, so
        that a concurrent rewrite of it (OPTIMIZE) conflicts at the commit instead of losing a
        mark. (A transaction's own `filterFiles` keeps only each file's row count of its
        statistics, and a file re-added with a deletion vector would lose the rest.)"""
        checksum = txn.snapshot().checksumOpt()
        if checksum.isDefined() and checksum.get().allFiles().isDefined():
            found = self.as_list(checksum.get().allFiles().get())
        else:
            found = txn.snapshot().allFiles().collectAsList()
        txn.readWholeTable()
        table = str(txn.deltaLog().dataPath().toString()).rstrip("/")
        out = []
        for add in found:
            path = str(add.path())
            absolute = "://" in path or path.startswith("file:")
            uri = unquote(path) if absolute else f"{table}/{unquote(path)}"
            rows = add.numPhysicalRecords()
            stats = json.loads(str(add.stats())) if add.stats() is not None else {}
            out.append(
                DataFile(
                    name_of(path),
                    uri,
                    int(rows.get()) if rows.isDefined() else None,
                    stats.get("minValues", {}),
                    stats.get("maxValues", {}),
                    add,
                )
            )
        return out

    def store(self, txn: Any) -> Any:
        if self._store is None:
            self._store = self._object(f"{_STORAGE}.DeletionVectorStore").createInstance(
                txn.deltaLog().newDeltaHadoopConf()
            )
        return self._store

    def marked(self, txn: Any, file: DataFile) -> Any:
        """The deletion vector `file` has, loaded (a RoaringBitmapArray; once per transaction)."""
        if file.name not in self._marked:
            stored = self._object(f"{_DV}.StoredBitmap")
            self._marked[file.name] = stored.create(
                file.add.deletionVector(), txn.deltaLog().dataPath()
            ).load(self.store(txn))
        return self._marked[file.name]

    def positions(self, bitmap: Any) -> np.ndarray[Any, np.dtype[np.int64]]:
        """A bitmap's row positions, passed as one byte array (not one call per position)."""
        values = bitmap.values()
        buffer = self.jvm.java.nio.ByteBuffer.allocate(8 * len(values))
        buffer.asLongBuffer().put(values)
        return np.frombuffer(bytes(buffer.array()), dtype=">i8").astype(np.int64)

    def deletion_vectors(
        self, txn: Any, files: Mapping[str, DataFile], gone: Mapping[str, Sequence[int]]
    ) -> Any:
        """The file actions that mark the rows `gone` names (file name → row positions)
        deleted: each file re-added with its deletion vector (merged with the one it had), or
        removed when none of its rows is left. Built here in the driver: no Spark job for a few
        bitmaps."""
        actions = self.jvm.java.util.ArrayList()
        if not gone:
            return actions
        table = txn.deltaLog().dataPath()
        store = self.store(txn)
        descriptor = self._object("org.apache.spark.sql.delta.actions.DeletionVectorDescriptor")
        portable = self._object(f"{_DV}.RoaringBitmapArrayFormat").Portable()
        file_id = self.jvm.java.util.UUID.randomUUID()
        writer = store.createWriter(
            store.generateFileNameInTable(store.pathWithFileSystem(table), file_id, "")
        )
        now = int(time.time() * 1000)
        try:
            for name, rows in sorted(gone.items()):
                file = files[name]
                bitmap = self._bitmap(rows)
                if file.has_deletions:
                    had = self.marked(txn, file)
                    had.merge(bitmap)
                    bitmap = had
                count = bitmap.cardinality()
                if file.rows == count:  # nothing of it is left
                    actions.add(file.add.removeWithTimestamp(now, True))
                    continue
                data = bitmap.serializeAsByteArray(portable)
                where = writer.write(data)
                dv = descriptor.onDiskWithRelativePath(
                    file_id, "", len(data), count, self.some(where.offset()), self.none()
                )
                add = file.add
                changed = add.removeRows(dv, True, getattr(add, "removeRows$default$3")())
                actions.add(changed._1())
                actions.add(changed._2())
        finally:
            writer.close()
        return actions

    def _bitmap(self, positions: Sequence[int]) -> Any:
        """Row positions as Delta's RoaringBitmapArray, passed as one byte array."""
        packed = struct.pack(f">{len(positions)}q", *positions)
        longs = self.jvm.java.nio.ByteBuffer.wrap(bytearray(packed)).asLongBuffer()
        gateway = self.spark.sparkContext._gateway
        assert gateway is not None  # a classic session's driver always has it
        values = gateway.new_array(self.jvm.long, len(positions))
        longs.get(values)
        seq = self.jvm.scala.collection.immutable.ArraySeq.unsafeWrapArray(values)
        return self._object(f"{_DV}.RoaringBitmapArray").apply(seq)

    def write_operation(self, user_metadata: str) -> Any:
        """The commit's operation: an append (what readers' history shows) with our metadata."""
        write = getattr(self.jvm.org.apache.spark.sql.delta, "DeltaOperations$Write")
        none = self.none()
        append = self.jvm.org.apache.spark.sql.SaveMode.Append
        some_meta = self.some(user_metadata)
        return write(append, none, none, some_meta, none, none, none, none, none)


def small_files(spark: SparkSession, path: str, below_bytes: int) -> int:
    """How many data files of the Delta table at `path` are smaller than `below_bytes`: from its
    newest version's checksum file when it lists them (no job), else by a Spark job over the
    table's state."""
    jvm = DeltaJvm(spark)
    snapshot = jvm.transaction(path).snapshot()
    checksum = snapshot.checksumOpt()
    if checksum.isDefined() and checksum.get().allFiles().isDefined():
        found = jvm.as_list(checksum.get().allFiles().get())
        return sum(1 for add in found if int(add.size()) < below_bytes)
    return int(snapshot.allFiles().filter(f"size < {int(below_bytes)}").count())
