"""The enrichment view (a time-dependent lookup join) against a replay of the same changes one by
one: each order change takes its customer as it was at that moment (a later update, delete or
truncate of the customer never rewrites it), a delete carries the order as it was, replayed rows
count once; and verify's recomputation (a max-by over the stored changes) agrees."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from changelake.views.checks import recomputed
from changelake.views.config import Lookup
from changelake.views.enrichment import changes, enriched
from changelake.views.stored_history import versions_of

POSITION = "_cdc_op string, _cdc_lsn long, _cdc_source_ts timestamp, _kafka_partition int, "
POSITION += "_kafka_offset long"
CUSTOMERS = f"id long, country string, {POSITION}"
ORDERS = f"id long, customer_id long, total int, {POSITION}"
LOOKUP = Lookup("customers", (("customer_id", "id"),), (("customer_country", "country"),))
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def ts(lsn: int) -> datetime:
    return T0 + timedelta(seconds=lsn)


def replay(seed: int) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], set[tuple[Any, ...]]]:
    """Stored customer and order changes, and each order change as the view must show it:
    (order id, LSN, op, customer_id, total, the customer's country at that LSN and the LSN of
    the change that made that version)."""
    rnd = random.Random(seed)
    customers: dict[int, tuple[str, int]] = {}  # id → (country, LSN of its version)
    orders: dict[int, tuple[int, int]] = {}
    stored_c: list[tuple[Any, ...]] = []
    stored_o: list[tuple[Any, ...]] = []
    want = set()
    for lsn in range(1, 160):
        at = (ts(lsn), 0, lsn)
        roll = rnd.random()
        if roll < 0.03:  # the customers table truncated
            stored_c.append((None, None, "t", lsn, *at))
            customers.clear()
        elif roll < 0.45:
            k = rnd.randrange(5)
            if k in customers and rnd.random() < 0.25:
                stored_c.append((k, None, "d", lsn, *at))
                del customers[k]
            else:
                op = "u" if k in customers else "c"
                customers[k] = (rnd.choice("ABCDE"), lsn)
                stored_c.append((k, customers[k][0], op, lsn, *at))
        else:
            k = rnd.randrange(8)
            if k in orders and rnd.random() < 0.2:  # its event holds the key alone
                stored_o.append((k, None, None, "d", lsn, *at))
                customer, total = orders.pop(k)
                want.add((k, lsn, "d", customer, total, *customers.get(customer, (None, None))))
            else:
                op = "u" if k in orders else "c"
                orders[k] = (rnd.randrange(6), lsn)  # customer 5 never exists
                stored_o.append((k, *orders[k], op, lsn, *at))
                want.add((k, lsn, op, *orders[k], *customers.get(orders[k][0], (None, None))))
    return stored_c, stored_o, want


def frames(spark: SparkSession, seed: int) -> tuple[DataFrame, DataFrame, set[tuple[Any, ...]]]:
    stored_c, stored_o, want = replay(seed)
    again = random.Random(seed)  # batches replayed after a crash: stored twice
    stored_c += again.sample(stored_c, 4)
    stored_o += again.sample(stored_o, 4)
    return spark.createDataFrame(stored_c, CUSTOMERS), spark.createDataFrame(stored_o, ORDERS), want


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_each_change_takes_the_lookup_row_as_it_was_then(spark: SparkSession, seed: int) -> None:
    customers, orders, want = frames(spark, seed)
    view = enriched(
        changes(orders, ["id"]), versions_of(customers, ("id",)), LOOKUP.on, LOOKUP.columns
    )
    assert view.columns == [
        "id", "customer_id", "total", "customer_country", "_lookup_lsn", "_cdc_op", "_cdc_lsn",
        "_cdc_source_ts",
    ]  # fmt: skip
    got = view.select(
        "id", "_cdc_lsn", "_cdc_op", "customer_id", "total", "customer_country", "_lookup_lsn"
    )
    rows = [tuple(r) for r in got.collect()]
    assert len(rows) == len(want)
    assert set(rows) == want


@pytest.mark.parametrize("seed", [1, 2])
def test_verify_recomputes_the_same_lookups_another_way(spark: SparkSession, seed: int) -> None:
    customers, orders, want = frames(spark, seed)
    got = recomputed(orders, ["id"], customers, LOOKUP)
    rows = [tuple(r) for r in got.collect()]
    assert len(rows) == len(want)
    assert set(rows) == {(k, lsn, op, country, at) for k, lsn, op, _, _, country, at in want}
