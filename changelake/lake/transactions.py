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
carry none: they count by their own LSN (a snapshot's is where it was taken). When such a change
is the newest a table covers, its transaction is read from the table's topic (read/as_of.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from changelake.changelog.decode import LSN, OFFSET, OP, PARTITION, TX
from changelake.exceptions import ChangelakeError
from changelake.lake.commits import CommitMeta
from changelake.spark import kafka_options

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
        stored = with_tx(stored)
        tx = F.col(TX)
        ends = self.transactions.select(F.col(XID).alias("_xid"), F.col(COMMIT).alias("_at"))
        # A change belongs to the END of its xid above its LSN: an xid (32 bits) comes back
        # after ~4 billion transactions, a history keeps changes for good.
        theirs = (tx == F.col("_xid")) & (F.col(LSN) < F.col("_at"))
        tagged = stored.where(tx.isNotNull() & (F.col(OP) != "r"))
        inside = ends.where(F.col("_at") <= F.lit(self.lsn))
        by_commit = tagged.join(inside, theirs, "left_semi")
        # A transaction whose END left the topic's retention committed before everything it
        # holds: its changes count by their own LSN, as those with no transaction id do.
        aged = tagged.join(ends, theirs, "left_anti").where(F.col(LSN) < F.lit(self.oldest))
        untagged = stored.where(tx.isNull() | (F.col(OP) == "r"))
        by_lsn = aged.unionByName(untagged).where(F.col(LSN) <= F.lit(self.lsn))
        return by_commit.unionByName(by_lsn).drop(TX)


def with_tx(stored: DataFrame) -> DataFrame:
    """A history as of before transaction ids were kept has none until its next append."""
    return stored if TX in stored.columns else stored.withColumn(TX, F.lit(None).cast("long"))


def oldest_commit(transactions: DataFrame, prefix: str) -> int:
    """The oldest commit LSN the connector's transaction topic still holds."""
    row = transactions.agg(F.min(COMMIT)).first()
    if row is None or row[0] is None:
        raise ChangelakeError(
            f"connector with topic prefix {prefix}: {transaction_topic(prefix)} holds no "
            "transaction, so no read can take whole transactions",
            "set provide.transaction.metadata to true in its connectors/*.json and apply it",
        )
    return int(row[0])


@dataclass(frozen=True)
class Reached:
    """Where a table's stored history stands: the newest change its commits cover."""

    table: str
    collection: str  # `schema.table`, as END events name it
    tx: int | None  # that change's transaction (None: a snapshot read, or none stored)
    lsn: int  # that change's LSN
    held: int  # how many changes of that transaction the history holds
    # Whether it holds all of them, when its topic says (None: `held` against the END's count).
    whole: bool | None = None
    tagged: bool = True  # False: that change was stored without its transaction's id


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
    stored = with_tx(stored)
    position = F.struct(F.col(OFFSET), F.col(LSN))
    row = (
        stored.where(covered | F.col(OFFSET).isNull())
        .agg(F.max_by(F.struct(TX, LSN, OP), position).alias("last"))
        .first()
    )
    last = row["last"] if row is not None else None
    if last is None:
        return Reached(table, collection, None, 0, 0)
    if last[OP] == "r":
        return Reached(table, collection, None, int(last[LSN]), 0)
    if last[TX] is None:  # a seed row, or stored before ids were kept: its topic must say
        return Reached(table, collection, None, int(last[LSN]), 0, tagged=False)
    # Distinct changes: a batch replayed after a crash, or Debezium sending a change again,
    # stores it twice.
    mine = stored.where(covered & (F.col(TX) == F.lit(last[TX])))
    held = mine.select(LSN, OP).distinct().count()
    return Reached(table, collection, int(last[TX]), int(last[LSN]), held)


def consistent_lsn(transactions: DataFrame, tables: list[Reached], oldest: int) -> int:
    """The newest commit LSN that every table in `tables` has reached (see the module);
    `oldest`: the oldest commit `transactions` holds."""
    lasts = [t.tx for t in tables if t.tx is not None]
    rows = transactions.where(F.col(XID).isin(lasts)).collect()
    blocks: list[Column] = []
    for t in tables:
        since, whole = t.lsn, True
        # Its END: the first of its xid above the change (an xid comes back, see ReadPoint).
        mine = sorted(
            (int(r[COMMIT]), r[COUNTS] or {}) for r in rows if r[XID] == t.tx and r[COMMIT] > t.lsn
        )
        if t.tx is not None and mine:
            since, counts = mine[0]
            whole = t.held >= int(counts.get(t.collection, 0)) if t.whole is None else t.whole
        elif t.tx is not None and t.lsn >= oldest:
            # Its END not visible yet: it commits after every END read, so the table holds
            # every one of those transactions (its topic is in commit order).
            continue
        needs = F.coalesce(F.col(COUNTS)[t.collection], F.lit(0)) > 0
        later = F.col(COMMIT) >= F.lit(since) if not whole else F.col(COMMIT) > F.lit(since)
        blocks.append(F.min(F.when(needs & later, F.col(COMMIT))))
    first_block = (F.least(*blocks) if len(blocks) > 1 else blocks[0]) if blocks else F.lit(None)
    limit = transactions.agg(first_block.alias("b"), F.max(COMMIT).alias("newest")).first()
    assert limit is not None
    if limit["b"] is None:
        return int(limit["newest"] or 0)
    before = transactions.where(F.col(COMMIT) < F.lit(limit["b"])).agg(F.max(COMMIT)).first()
    # No commit before it that the topic holds: just below it reads the same transactions.
    return int(before[0]) if before is not None and before[0] is not None else limit["b"] - 1
