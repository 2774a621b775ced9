"""`changelake query --as-of-lsn LSN` and `--consistent`: every table and view read as of the
same source transaction (lake/transactions.py), from the tables' stored histories.

`--consistent` reads at the newest commit LSN every table keeping a history has reached, so a
query never sees half of a multi-table transaction; `--as-of-lsn` at one the caller names, which
must not be past that point (a table would miss transactions committed before it). A table
without a history cannot be read at a point: naming one is an error that says how to keep one.
LSNs are one database's: with several connectors, each is read at its own point.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql import SparkSession

from changelake import kafka_io
from changelake.exceptions import ChangelakeError, RetryableError
from changelake.lake.commits import CommitMeta
from changelake.lake.layout import delta_exists, history_of
from changelake.lake.table import covered
from changelake.lake.transactions import (
    Reached,
    ReadPoint,
    committed,
    consistent_lsn,
    oldest_commit,
    reached,
    transaction_topic,
)
from changelake.pg import pg_lsn
from changelake.settings import Settings
from changelake.tables import TableRef

LOOK_BACK = 4  # records before a table's covered end searched for its last change


@dataclass(frozen=True)
class AsOf:
    lsn: int | None = None  # None: the newest consistent point


def parse_lsn(text: str) -> int:
    """`0/16B3748` (as Postgres writes it) or a plain number (as Debezium's `source.lsn`)."""
    high, slash, low = text.strip().partition("/")
    try:
        return (int(high, 16) << 32 | int(low, 16)) if slash else int(high)
    except ValueError:
        raise ChangelakeError(
            f"--as-of-lsn: {text!r} is not an LSN",
            "write it as Postgres does (0/16B3748) or as a number (a change's _cdc_lsn)",
        ) from None


def read_points(
    spark: SparkSession,
    settings: Settings,
    refs: list[TableRef],
    as_of: AsOf,
    say: Callable[[str], None],
) -> dict[str, ReadPoint]:
    """Per connector (topic prefix) with tables keeping a history: the transactions a read as
    of `as_of` takes."""
    points: dict[str, ReadPoint] = {}
    for prefix in sorted({r.prefix for r in refs if r.keeps_history}):
        kept = [r for r in refs if r.prefix == prefix and r.keeps_history]
        transactions = committed(spark, settings.kafka_bootstrap, prefix)
        oldest = oldest_commit(transactions, prefix)
        progress = [p for r in kept if (p := _reached(spark, settings, r)) is not None]
        newest = consistent_lsn(transactions, progress, oldest) if progress else 0
        lsn = newest if as_of.lsn is None else as_of.lsn
        connector = kept[0].connector
        if lsn > newest:
            raise ChangelakeError(
                f"--as-of-lsn {pg_lsn(lsn)}: connector {connector}'s tables have not all "
                f"stored every transaction committed by then; the newest point they have is "
                f"{pg_lsn(newest)}",
                "read at it with --consistent, or wait for `changelake run` to catch up",
            )
        if lsn < oldest:
            raise ChangelakeError(
                f"--as-of-lsn {pg_lsn(lsn)}: {transaction_topic(prefix)} no longer holds the "
                f"transactions committed by then (its oldest commit is {pg_lsn(oldest)}), so a "
                "read there could split one",
                "read at a later LSN; the topic keeps a week (retention.ms)",
            )
        points[prefix] = ReadPoint(lsn, transactions, oldest)
        say(
            f"{connector}: read as of commit LSN {pg_lsn(lsn)} ({lsn}): every transaction "
            "committed by then, none after"
        )
    return points


def _reached(spark: SparkSession, settings: Settings, ref: TableRef) -> Reached | None:
    path = ref.path(settings.lake)
    meta = covered(spark, path) if delta_exists(spark, history_of(path)) else None
    if meta is None:
        return None
    stored = spark.read.format("delta").load(history_of(path))
    found = reached(ref.name, f"{ref.schema}.{ref.table}", stored, meta)
    return found if found.tagged else _from_topic(settings.kafka_bootstrap, ref, meta, found)


def _from_topic(bootstrap: str, ref: TableRef, meta: CommitMeta, found: Reached) -> Reached:
    """For a history whose newest covered change has no transaction id (its seed, or stored
    before ids were kept): that change's transaction from the table's topic, and whether the
    record after the covered ones (a transaction's records are consecutive) is of another."""
    ((partition, end),) = meta.offsets.items()
    last: tuple[int, int] | None = None  # xid, LSN
    for offset in range(end - 1, max(end - 1 - LOOK_BACK, -1), -1):  # past tombstones
        source = _source(bootstrap, ref.topic, int(partition), offset)
        if source is not None:
            last = (int(source["txId"]), int(source["lsn"])) if source.get("txId") else None
            break
    if last is None:  # a snapshot read, or nothing to tell by: its LSN, as a snapshot's
        return replace(found, tagged=True)
    high = kafka_io.watermarks(bootstrap, ref.topic)[int(partition)][1]
    after = _source(bootstrap, ref.topic, int(partition), end) if end < high else None
    whole = after is None or after.get("txId") != last[0]
    return replace(found, tx=last[0], lsn=last[1], whole=whole, tagged=True)


def _source(bootstrap: str, topic: str, partition: int, offset: int) -> dict[str, Any] | None:
    """The `source` block of the change at that offset (None: a tombstone, or compacted away)."""
    try:
        raw = kafka_io.fetch_one(bootstrap, topic, partition, offset)
    except RetryableError:
        return None
    value = json.loads(raw.value) if raw.value else None
    payload = value.get("payload", value) if isinstance(value, dict) else None
    source = payload.get("source") if isinstance(payload, dict) else None
    return source if isinstance(source, dict) else None


def refuse_without_history(named: set[str], refs: list[TableRef]) -> None:
    """A table the statement names that cannot be read at a point."""
    for ref in refs:
        if ref.name.lower() in named and not ref.keeps_history:
            raise ChangelakeError(
                f"{ref.name} keeps no history, so it cannot be read as of one transaction",
                f'add it to lake.json\'s "history" (["{ref.name}"]) or to a view of views.json; '
                "its history starts at the next `changelake run`",
            )
