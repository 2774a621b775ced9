"""Reads at one source transaction boundary (`query --as-of-lsn`, `--consistent`).

Debezium's transaction metadata (`provide.transaction.metadata`) puts an END event for every
source transaction on `<prefix>.transaction`, in commit order: its id (`<xid>:<commit LSN>`) and
how many events it sent per table. Every change names its xid, which a table's stored history
keeps (`_cdc_tx`). So a read "as of commit LSN L" takes, from each table's history, the changes
of exactly the transactions that committed at or before L: whole transactions, never half of
one. Filtering the changes' own LSNs cannot promise that: a transaction's changes have LSNs
below its commit, interleaved with transactions that committed before it.

The newest LSN every table has reached (`--consistent`) comes from the histories and the END
events, without reading any table's topic: a table (one partition, read in order) holds every
transaction before the one of the newest change its commits cover, and that one too once it holds
as many of its changes as its END counted. It has not reached the first later transaction that
has changes for it. The point is the newest commit before the earliest such transaction of any
table.

Changes stored before histories kept transaction ids, snapshot reads and a history's seed rows
carry none: they count by their own LSN (a snapshot's is where it was taken).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.changelog.decode import LSN, OFFSET, OP, PARTITION, TX
from pipelines.exceptions import ChangelakeError
from pipelines.sinks.delta import CommitMeta
from pipelines.spark import kafka_options

XID, COMMIT, COUNTS = "xid", "commit_lsn", "counts"
_EVENT = T.StructType(
    [
        T.StructField("status", T.StringType()),
        T.StructField("id", T.StringType()),
        T.StructField(
            "data_collections",
            T.ArrayType(
                T.StructType(
                    [
                        T.StructField("data_collection", T.StringType()),
                        T.StructField("event_count", T.LongType()),
                    ]
                )
            ),
        ),
    ]
)
# A connector writing schemas into every record (JsonConverter, schemas.enable) wraps it.
_ENVELOPE = T.StructType([*_EVENT.fields, T.StructField("payload", _EVENT)])


def transaction_topic(prefix: str) -> str:
    """Where Debezium puts a connector's transaction events (its default topic name)."""
    return f"{prefix}.transaction"


def committed(spark: SparkSession, bootstrap: str, prefix: str) -> DataFrame:
    """One row per transaction the connector's END events name: xid, commit LSN and its events
    per table (`schema.table` → count), cached. Debezium sends a transaction again after a
    restart inside it; its first END is the one kept."""
    topic = transaction_topic(prefix)
    raw = (
        spark.read.format("kafka")
        .options(**kafka_options(spark, bootstrap, [topic]))
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    parsed = F.from_json(F.col("value").cast("string"), _ENVELOPE)
    event = raw.select(
        F.col("offset"), F.coalesce(parsed["payload"], parsed.dropFields("payload")).alias("e")
    )
    ends = event.where(F.col("e.status") == "END").select(
        F.col("offset"),
        F.split(F.col("e.id"), ":")[0].cast("long").alias(XID),
        F.split(F.col("e.id"), ":")[1].cast("long").alias(COMMIT),
        F.map_from_entries(
            F.transform(
                F.col("e.data_collections"),
                lambda c: F.struct(c["data_collection"], c["event_count"]),
            )
        ).alias(COUNTS),
    )
    first = ends.groupBy(XID).agg(F.min_by(F.struct(COMMIT, COUNTS), F.col("offset")).alias("t"))
    return first.select(XID, "t.*").persist()


@dataclass(frozen=True)
class ReadPoint:
    """Every transaction of one connector that committed at or before `lsn`."""

    lsn: int
    transactions: DataFrame  # committed(): the connector's transactions the topic holds
    oldest: int  # the oldest commit LSN it still holds (older ones fell out of its retention)

    def of(self, stored: DataFrame) -> DataFrame:
        """A stored history's changes of those transactions (dropped: its transaction ids)."""
        tx = F.col(TX)
        inside = self.transactions.where(F.col(COMMIT) <= F.lit(self.lsn)).select(
            F.col(XID).alias(TX)
        )
        known = self.transactions.select(F.col(XID).alias(TX))
        tagged = stored.where(tx.isNotNull() & (F.col(OP) != "r"))
        by_commit = tagged.join(inside, TX, "left_semi")
        # A transaction whose END left the topic's retention committed before everything it
        # holds: its changes count by their own LSN, as those with no transaction id do.
        aged = tagged.join(known, TX, "left_anti").where(F.col(LSN) < F.lit(self.oldest))
        untagged = stored.where(tx.isNull() | (F.col(OP) == "r"))
        by_lsn = aged.unionByName(untagged).where(F.col(LSN) <= F.lit(self.lsn))
        return by_commit.unionByName(by_lsn).drop(TX)


def read_point(transactions: DataFrame, lsn: int, prefix: str) -> ReadPoint:
    """The connector `prefix`'s transactions up to commit `lsn`."""
    row = transactions.agg(F.min(COMMIT), F.max(COMMIT)).first()
    if row is None or row[0] is None:
        raise ChangelakeError(
            f"connector with topic prefix {prefix}: {transaction_topic(prefix)} holds no "
            "transaction, so no read can take whole transactions",
            "set provide.transaction.metadata to true in its connectors/*.json and apply it",
        )
    return ReadPoint(lsn, transactions, int(row[0]))


@dataclass(frozen=True)
class Reached:
    """Where a table's stored history stands: the newest change its commits cover."""

    table: str
    collection: str  # `schema.table`, as END events name it
    tx: int | None  # that change's transaction (None: a snapshot read, or none stored)
    lsn: int  # that change's LSN
    held: int  # how many changes of that transaction the history holds


def reached(table: str, collection: str, stored: DataFrame, meta: CommitMeta) -> Reached:
    """Where `stored` (a history holding what `meta`, its table's newest commits, covers and
    perhaps a replayed batch beyond) stands."""
    if len(meta.offsets) > 1:
        raise ChangelakeError(
            f"{table}: its topic has {len(meta.offsets)} partitions; a read at one transaction "
            "needs each table's changes in commit order, in one partition",
        )
    covered = F.lit(False)
    for partition, offset in meta.offsets.items():
        covered |= (F.col(PARTITION) == int(partition)) & (F.col(OFFSET) < int(offset))
    position = F.struct(F.col(OFFSET), F.col(LSN))
    row = (
        stored.where(covered | F.col(OFFSET).isNull())
        .agg(F.max_by(F.struct(TX, LSN, OP), position).alias("last"))
        .first()
    )
    last = row["last"] if row is not None else None
    if last is None:
        return Reached(table, collection, None, 0, 0)
    tx = None if last[OP] == "r" else last[TX]
    held = stored.where(covered & (F.col(TX) == F.lit(tx))).count() if tx is not None else 0
    return Reached(table, collection, tx, int(last[LSN]), held)


def consistent_lsn(transactions: DataFrame, tables: list[Reached]) -> int:
    """The newest commit LSN that every table in `tables` has reached (see the module)."""
    lasts = [t.tx for t in tables if t.tx is not None]
    found = {
        int(r[XID]): (int(r[COMMIT]), r[COUNTS] or {})
        for r in transactions.where(F.col(XID).isin(lasts)).collect()
    }
    blocks: list[Column] = []
    for t in tables:
        since, whole = t.lsn, True
        if t.tx is not None and t.tx in found:
            since, counts = found[t.tx]
            whole = t.held >= int(counts.get(t.collection, 0))
        elif t.tx is not None:  # its END not read yet: it committed after every one read
            since = t.lsn - 1
        needs = F.coalesce(F.col(COUNTS)[t.collection], F.lit(0)) > 0
        later = F.col(COMMIT) >= F.lit(since) if not whole else F.col(COMMIT) > F.lit(since)
        blocks.append(F.min(F.when(needs & later, F.col(COMMIT))))
    first_block = F.least(*blocks) if len(blocks) > 1 else blocks[0]
    limit = transactions.agg(first_block.alias("b"), F.max(COMMIT).alias("newest")).first()
    assert limit is not None
    if limit["b"] is None:
        return int(limit["newest"] or 0)
    before = transactions.where(F.col(COMMIT) < F.lit(limit["b"])).agg(F.max(COMMIT)).first()
    # No commit before it that the topic holds: just below it reads the same transactions.
    return int(before[0]) if before is not None and before[0] is not None else limit["b"] - 1
