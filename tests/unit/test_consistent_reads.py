"""Reads at one source transaction (lake/transactions.py) against a simulated source whose
transactions interleave: each writes an order and its lines (the order's total is the sum of
its lines' amounts at every commit), changes both, or deletes both, with change LSNs of
concurrent transactions mixed and topics in commit order. A read as of any LSN must equal the
replay of the transactions committed by then, and balance; filtering the changes' own LSNs does
not. The consistent point must be the newest commit every table has stored whole, whatever
prefix of its topic each table's commits cover."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from changelake.lake.commits import CommitMeta
from changelake.lake.transactions import ReadPoint, consistent_lsn, reached
from changelake.views.history import CURRENT
from changelake.views.stored_history import versions_of

POSITION = "_cdc_op string, _cdc_lsn long, _cdc_source_ts timestamp, _kafka_partition int, "
POSITION += "_kafka_offset long, _cdc_tx long"
SCHEMAS = {
    "orders": f"id long, total long, {POSITION}",
    "lines": f"order_id long, line_no int, amount long, {POSITION}",
}
KEYS = {"orders": ("id",), "lines": ("order_id", "line_no")}
COLLECTION = {"orders": "public.orders", "lines": "public.lines"}
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Tx:
    xid: int
    changes: list[tuple[str, tuple[Any, ...], str, int]] = field(default_factory=list)
    commit: int = 0  # (table, row, op, LSN) above; the commit LSN once committed


def simulate(seed: int, count: int = 60) -> list[Tx]:
    """Committed transactions in commit order. A key an open transaction touched waits for it
    (Postgres' row locks), so each key's changes are in commit order."""
    rnd = random.Random(seed)
    lsn, xid, next_order = 100, 1000, 1
    orders: dict[int, list[int]] = {}  # committed: order → its lines' amounts
    locked: set[int] = set()
    open_: list[tuple[Tx, list[tuple[str, Any, str]]]] = []  # each with the writes still to make
    done: list[Tx] = []
    while len(done) < count:
        if len(open_) < 3 and rnd.random() < 0.5:
            xid += 1
            free = [o for o in orders if o not in locked]
            roll = rnd.random()
            writes: list[tuple[str, Any, str]]
            after: tuple[int, list[int] | None]
            if roll < 0.5 or not free:
                o, next_order = next_order, next_order + 1
                amounts = [rnd.randint(1, 9) for _ in range(rnd.randint(1, 3))]
                writes = [("orders", (o, sum(amounts)), "c")]
                writes += [("lines", (o, n, a), "c") for n, a in enumerate(amounts, 1)]
                after = (o, amounts)
            elif roll < 0.8:
                o = rnd.choice(free)
                n = rnd.randrange(len(orders[o]))
                amounts = list(orders[o])
                amounts[n] = rnd.randint(1, 9)
                writes = [("lines", (o, n + 1, amounts[n]), "u")]
                writes += [("orders", (o, sum(amounts)), "u")]
                after = (o, amounts)
            else:
                o = rnd.choice(free)
                writes = [("lines", (o, n, None), "d") for n in range(1, len(orders[o]) + 1)]
                writes += [("orders", (o, None), "d")]
                after = (o, None)
            locked.add(o)
            open_.append((Tx(xid), [*writes, ("commit", after, "")]))
            continue
        if not open_:
            continue
        tx, pending = rnd.choice(open_)
        lsn += rnd.randint(1, 20)
        table, row, op = pending.pop(0)
        if table != "commit":
            tx.changes.append((table, row, op, lsn))
            continue
        tx.commit = lsn
        o, final = row
        if final is None:
            orders.pop(o, None)
        else:
            orders[o] = final
        locked.discard(o)
        open_.remove((tx, pending))
        done.append(tx)
    return done


def stored(spark: SparkSession, txs: list[Tx], table: str) -> DataFrame:
    """The table's topic as its history stores it: commit order, then LSN."""
    rows: list[tuple[Any, ...]] = []
    for tx in txs:
        for t, row, op, lsn in tx.changes:
            if t == table:
                at = (T0 + timedelta(seconds=lsn), 0, len(rows), tx.xid)
                rows.append((*row, op, lsn, *at))
    return spark.createDataFrame(rows, SCHEMAS[table])


def ends(spark: SparkSession, txs: list[Tx]) -> DataFrame:
    rows = []
    for tx in txs:
        counts: dict[str, int] = {}
        for t, *_ in tx.changes:
            counts[COLLECTION[t]] = counts.get(COLLECTION[t], 0) + 1
        rows.append((tx.xid, tx.commit, counts))
    return spark.createDataFrame(rows, "xid long, commit_lsn long, counts map<string,bigint>")


def replay(txs: list[Tx], until: int, by_change: bool = False) -> dict[str, set[tuple[Any, ...]]]:
    """The tables with every transaction committed by `until` applied; `by_change`: every
    change whose own LSN is at most `until` instead, in LSN order (what a filter on the
    changes' LSNs reads)."""
    state: dict[str, dict[tuple[Any, ...], tuple[Any, ...]]] = {"orders": {}, "lines": {}}
    changes = [
        (lsn, t, row, op)
        for tx in txs
        for t, row, op, lsn in tx.changes
        if (lsn if by_change else tx.commit) <= until
    ]
    if by_change:
        changes.sort()
    for _, table, row, op in changes:
        key = row[: len(KEYS[table])]
        if op == "d":
            state[table].pop(key, None)
        else:
            state[table][key] = row
    return {t: set(rows.values()) for t, rows in state.items()}


def current(frame: DataFrame, table: str, by: tuple[str, ...] = ()) -> set[tuple[Any, ...]]:
    """The current rows of a stored history's versions (`by`: columns leading the key)."""
    rows = versions_of(frame, (*by, *KEYS[table])).where(F.col(CURRENT))
    names = [c.split()[0] for c in SCHEMAS[table].split(",")][: 3 if table == "lines" else 2]
    return {tuple(r) for r in rows.select(*by, *names).collect()}


def balanced(state: dict[str, set[tuple[Any, ...]]]) -> bool:
    sums: dict[int, int] = {}
    for order_id, _, amount in state["lines"]:
        sums[order_id] = sums.get(order_id, 0) + amount
    return all(sums.get(o, 0) == total for o, total in state["orders"]) and set(sums) <= {
        o for o, _ in state["orders"]
    }


def test_a_read_as_of_an_lsn_takes_whole_transactions(spark: SparkSession) -> None:
    seed = 3
    txs = simulate(seed)
    history = {t: stored(spark, txs, t).cache() for t in KEYS}
    transactions = ends(spark, txs).cache()
    rnd = random.Random(seed)
    commits = sorted(tx.commit for tx in txs)
    changes = sorted(lsn for tx in txs for *_, lsn in tx.changes)
    # What the transaction ids are for: a filter on the changes' own LSNs splits transactions.
    assert any(not balanced(replay(txs, lsn, by_change=True)) for lsn in changes)
    points = [*rnd.sample(commits, 2), *rnd.sample(changes, 3)]
    # Every point's read in one job per table: the point is part of the key.
    got: dict[int, dict[str, set[tuple[Any, ...]]]] = {lsn: {} for lsn in points}
    for t in KEYS:
        reads = [
            ReadPoint(lsn, transactions, commits[0])
            .of(history[t])
            .select(F.lit(lsn).alias("_point"), "*")
            for lsn in points
        ]
        union = reads[0]
        for frame in reads[1:]:
            union = union.unionByName(frame)
        for row in current(union, t, ("_point",)):
            got[row[0]].setdefault(t, set()).add(row[1:])
    for lsn in points:
        state = {t: got[lsn].get(t, set()) for t in KEYS}
        assert state == replay(txs, lsn), f"as of {lsn}"
        assert balanced(state)


def test_the_consistent_point_is_the_newest_commit_every_table_holds_whole(
    spark: SparkSession,
) -> None:
    txs = simulate(5, count=40)
    history = {t: stored(spark, txs, t).cache() for t in KEYS}
    sizes = {t: history[t].count() for t in KEYS}
    all_ends = ends(spark, txs).cache()
    newest_unseen = all_ends.where(F.col("xid") != txs[-1].xid).cache()
    rnd = random.Random(5)
    # Each table's commits cover a prefix of its topic, cut anywhere (mid-transaction too); the
    # last case covers everything while the newest transaction's END is not visible yet.
    cases = [({t: rnd.randint(1, sizes[t]) for t in KEYS}, all_ends, txs) for _ in range(3)]
    cases.append(({t: sizes[t] for t in KEYS}, newest_unseen, txs[:-1]))
    for cut, transactions, visible in cases:
        progress = []
        for t in KEYS:
            # A batch replayed after a crash stores its last covered changes again (same
            # offsets), and the history may hold changes beyond the covered ones.
            again = history[t].where(F.col("_kafka_offset").between(cut[t] - 2, cut[t] - 1))
            meta = CommitMeta("apply", t, {"0": cut[t]}, 0, None, KEYS[t])
            progress.append(reached(t, COLLECTION[t], history[t].unionByName(again), meta))
        got = consistent_lsn(transactions, progress, txs[0].commit)
        # Brute force: the newest commit such that every transaction up to it has all its
        # changes of each table inside that table's covered prefix (and its END is visible).
        offsets: dict[str, int] = {t: 0 for t in KEYS}
        want = 0
        for tx in visible:
            mine = {t: sum(1 for c in tx.changes if c[0] == t) for t in KEYS}
            if not all(offsets[t] + mine[t] <= cut[t] for t in KEYS):
                break
            want = tx.commit
            for t in KEYS:
                offsets[t] += mine[t]
        if want:
            assert got == want, cut
        else:  # not even the first transaction: just below it
            assert got < txs[0].commit
        covered = {t: history[t].where(F.col("_kafka_offset") < cut[t]) for t in KEYS}
        point = ReadPoint(got, transactions, txs[0].commit)
        state = {t: current(point.of(covered[t]), t) for t in KEYS}
        assert state == replay(txs, got) and balanced(state)
