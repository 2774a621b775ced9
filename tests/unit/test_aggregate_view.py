"""An aggregate view maintained round by round (only the groups a round's changes can touch
recomputed, views/aggregate.py) equals the whole view computed again after every round, through
random inserts, updates, deletes with key-only events, orders moving between customers and
customers moving country; and a round recomputes only a few of the groups."""

from __future__ import annotations

import random
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from changelake.views.aggregate import aggregated, touched_groups
from changelake.views.aggregate_config import parse_aggregate

AGG = parse_aggregate(
    "views.json: views.revenue",
    "customers",
    {
        "columns": ["country"],
        "joins": [
            {"table": "orders", "on": {"customer_id": "customers.id"}},
            {"table": "order_lines", "on": {"order_id": "orders.id"}, "optional": True},
        ],
        "measures": {
            "orders": "count(DISTINCT orders.id)",
            "revenue": "coalesce(sum(order_lines.qty * order_lines.price), 0)",
        },
    },
)
COLUMNS = {
    "customers": "id long, country string",
    "orders": "id long, customer_id long",
    "order_lines": "order_id long, line_no int, qty long, price long",
}
KEYS = {"customers": ("id",), "orders": ("id",), "order_lines": ("order_id", "line_no")}
POSITION = "_cdc_op string, _cdc_lsn long, _kafka_partition int, _kafka_offset long"


class Source:
    """The three tables as they are, and every change stored (as run stores them)."""

    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.rows: dict[str, dict[tuple[Any, ...], tuple[Any, ...]]] = {t: {} for t in KEYS}
        self.stored: dict[str, list[tuple[Any, ...]]] = {t: [] for t in KEYS}
        self.lsn = 0

    def change(self, table: str, key: tuple[Any, ...], row: tuple[Any, ...] | None) -> None:
        self.lsn += 1
        had = key in self.rows[table]
        if row is None:
            if not had:
                return
            del self.rows[table][key]
            blank = (None,) * (len(COLUMNS[table].split(",")) - len(key))
            self.stored[table].append((*key, *blank, "d", self.lsn, 0, self.lsn))  # key only
        else:
            self.rows[table][key] = row
            self.stored[table].append((*row, "u" if had else "c", self.lsn, 0, self.lsn))

    def churn(self, n: int) -> None:
        rnd = self.rnd
        for _ in range(n):
            roll = rnd.random()
            if roll < 0.2:
                c = rnd.randrange(60)
                gone = rnd.random() < 0.15
                self.change("customers", (c,), None if gone else (c, rnd.choice("ABC")))
            elif roll < 0.5:
                o = rnd.randrange(120)
                gone = rnd.random() < 0.15
                self.change("orders", (o,), None if gone else (o, rnd.randrange(60)))
            else:
                k = (rnd.randrange(120), rnd.randrange(3))
                gone = rnd.random() < 0.2
                row = (*k, rnd.randrange(1, 5), rnd.randrange(1, 100))
                self.change("order_lines", k, None if gone else row)

    def frames(
        self, spark: SparkSession, since: dict[str, int]
    ) -> tuple[dict[str, DataFrame], ...]:
        current = {
            t: spark.createDataFrame(list(r.values()), COLUMNS[t]) for t, r in self.rows.items()
        }
        stored = {
            t: spark.createDataFrame(s, f"{COLUMNS[t]}, {POSITION}") for t, s in self.stored.items()
        }
        new = {t: stored[t].where(stored[t]["_kafka_offset"] > since[t]) for t in KEYS}
        return current, stored, new


def test_rounds_of_touched_groups_keep_the_view_whole(spark: SparkSession) -> None:
    source = Source(7)
    source.churn(500)  # the view's first computation: whole
    current, _, _ = source.frames(spark, {t: 0 for t in KEYS})
    view = {r["id"]: tuple(r) for r in aggregated(AGG, "customers", ("id",), current).collect()}
    recomputed = []
    for _ in range(4):
        since = {t: source.lsn for t in KEYS}
        source.churn(6)
        current, stored, new = source.frames(spark, since)
        groups = touched_groups(AGG, "customers", KEYS, new, stored, current)
        touched = {r["id"] for r in groups.collect()}
        fresh = aggregated(AGG, "customers", ("id",), current, groups).collect()
        for key in touched:  # the merge: a touched group with no rows left is deleted
            view.pop(key, None)
        view |= {r["id"]: tuple(r) for r in fresh}
        whole = aggregated(AGG, "customers", ("id",), current).collect()
        assert view == {r["id"]: tuple(r) for r in whole}
        recomputed.append(len(touched))
    assert max(recomputed) < len(view) / 3, recomputed  # a few groups, not the view
