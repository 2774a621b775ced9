"""A keyed table's columns kept in step with its events, before a batch appends: the base table
made on the first change when no snapshot made it, the changelog's (and the stored history's)
columns brought up to the events' (the compactor brings the base table's), and, for columns
added with values in rows already here, those rows asked for again (`added_columns`)."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from changelake.apply.added_columns import AddedColumns
from changelake.changelog.batch import Decoded
from changelake.changelog.evolution import reconcile
from changelake.lake.commits import CommitMeta
from changelake.lake.layout import META_COLUMNS
from changelake.sinks.changelog import ChangelogSink
from changelake.sinks.delta import DeltaSink, evolve
from changelake.sinks.history import HistorySink
from changelake.tables import TableRef


class TableColumns:
    def __init__(
        self,
        spark: SparkSession,
        table: TableRef,
        base: DeltaSink,
        changelog: ChangelogSink,
        history: HistorySink | None,
        added: AddedColumns | None,
    ) -> None:
        self.spark, self.table, self.added = spark, table, added
        self.base, self.changelog, self.history = base, changelog, history
        # Kept across batches, so a batch asks Delta only when the columns change.
        self.stored: T.StructType | None = None  # None: not read yet, or the table is changing

    def prepare(self, decoded: Decoded, previous: CommitMeta | None, key: tuple[str, ...]) -> None:
        """Create the base table on the first change if no snapshot did, and bring the
        changelog's columns up to the events' (the compactor brings the base table's)."""
        if self.stored is None:
            if not self.base.exists():
                empty = decoded.changes.limit(0) if decoded.changes is not None else None
                assert empty is not None
                columns = [F.col(f.name) for f in decoded.columns.fields]
                meta = CommitMeta("create", self.table.topic, {}, 0, None, key)
                self.base.create(empty.select(*columns, *META_COLUMNS), meta)
                return
            exists = self.changelog.exists()
            self.stored = (self.changelog if exists else self.base).data_schema()
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
            if self.changelog.exists():  # else the first append creates it with these columns
                evolve(self.spark, self.changelog.path, evolution)
            if self.history is not None and self.history.exists():  # by its own columns
                stored = self.history.data_schema()
                evolve(
                    self.spark,
                    self.history.path,
                    reconcile(self.table.name, stored, decoded.columns, key, key),
                )
