"""A keyed table's columns kept in step with its events, before a batch writes: the base table
made on the first change when no snapshot made it, its columns (and the stored history's)
brought up to the events', and, for columns added with values in rows already here, those rows
asked for again (`added_columns`)."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from changelake.apply.added_columns import AddedColumns
from changelake.changelog.batch import Decoded
from changelake.changelog.evolution import reconcile
from changelake.lake.commits import CommitMeta
from changelake.lake.layout import META_COLUMNS
from changelake.sinks.delta import DeltaSink, evolve
from changelake.sinks.history import HistorySink
from changelake.tables import TableRef


class TableColumns:
    def __init__(
        self,
        spark: SparkSession,
        table: TableRef,
        base: DeltaSink,
        history: HistorySink | None,
        added: AddedColumns | None,
    ) -> None:
        self.spark, self.table, self.added = spark, table, added
        self.base, self.history = base, history
        # Kept across batches, so a batch asks Delta only when the columns change.
        self.stored: T.StructType | None = None  # None: not read yet, or the table is changing

    def prepare(self, decoded: Decoded, previous: CommitMeta | None, key: tuple[str, ...]) -> None:
        """Create the base table on the first change if no snapshot did, and bring its
        columns up to the events'."""
        if self.stored is None:
            if not self.base.exists():
                empty = decoded.changes.limit(0) if decoded.changes is not None else None
                assert empty is not None
                columns = [F.col(f.name) for f in decoded.columns.fields]
                meta = CommitMeta("create", self.table.topic, {}, 0, None, key)
                self.base.create(empty.select(*columns, *META_COLUMNS), meta)
                return
            self.stored = self.base.data_schema()
        evolution = reconcile(
            self.table.name,
            self.stored,
            decoded.columns,
            previous.key if previous else (),
            key,
        )
        if not evolution.empty:
            if evolution.add and self.added is not None:  # rows already here lack their values
                self.added.resend([f.name for f in evolution.add])
            self.stored = None  # read back after the change, as Delta stored it
            self.base.evolve(evolution)
            if self.history is not None and self.history.exists():  # by its own columns
                stored = self.history.data_schema()
                evolve(
                    self.spark,
                    self.history.path,
                    reconcile(self.table.name, stored, decoded.columns, key, key),
                )
