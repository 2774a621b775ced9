"""The demo shop end to end, through the shipped connector: after the snapshot and after a mixed
demo load, every derived table equals its Postgres table row by row and column by column."""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path

import polars as pl
import psycopg
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from changelake import kafka_io, tables
from changelake.demo.load import run_load
from changelake.demo.seed import seed
from changelake.lake.layout import history_of
from changelake.lake.table import covered
from changelake.settings import Settings
from changelake.views.checks import check_view
from changelake.views.derived import derived_views
from tests.compare import assert_read_outside_spark, assert_same, delta_rs_rows, text_columns
from tests.support import changelake, changelake_here

pytestmark = pytest.mark.stack
KEYS = {
    "customers": ["id"],
    "products": ["sku"],
    "orders": ["id"],
    "order_lines": ["order_id", "line_no"],
}


def _assert_shop_equal(spark: SparkSession, dsn: str, lake: Path) -> None:
    for table, key in KEYS.items():
        json_columns = {"profile"} if table == "customers" else set()
        assert_same(spark, dsn, f"public.{table}", f"{lake}/shop/public/{table}", key, json_columns)


def _assert_open_to_other_readers(dsn: str, lake: Path) -> None:
    """After a `--once` run every base table is current on its own, and readers without Spark
    see it row by row equal to the source: Polars and delta-rs (its QueryBuilder: the base tables
    keep deletion vectors, which its to_pyarrow_table refuses)."""
    for table, key in KEYS.items():
        path = f"{lake}/shop/public/{table}"
        frame = pl.read_delta(path)
        readers = {
            "polars": frame.to_dicts(),
            "delta-rs": delta_rs_rows(path),
        }
        json_columns = {"profile"} if table == "customers" else set()
        assert_read_outside_spark(
            dsn, f"public.{table}", key, readers, text_columns(frame), json_columns
        )


def _assert_views(
    spark: SparkSession, settings: Settings, lake: Path, after: dict[str, dict[str, int]]
) -> dict[str, int]:
    """The shop's views (views.json) pass verify's checks: customers_history's current versions
    and orders_enriched's newest changes are their tables' rows (which equal the source), every
    order change's customer is the one a max-by over the stored changes finds, and
    customer_revenue is the whole aggregate computed again. Each table's stored history holds
    each change in its topic since the snapshot (`after`: the snapshot's end offsets) once.
    Returns each view's rows compared."""
    refs = tables.captured(settings, ["customers", "orders", "order_lines"])
    views = {v.name: v for v in derived_views(replace(settings, lake=str(lake)), refs)}
    assert sorted(views) == [
        "customer_revenue", "customer_sessions", "customers_history", "orders_enriched",
        "revenue_5_minutes", "revenue_per_minute", "time_to_ship",
    ]  # fmt: skip
    rows = {}
    for view in views.values():
        found = check_view(spark, view, timeout_s=0)  # `run --once` maintained it as it ended
        assert found.equal and found.rows > 0, (view.name, found)
        rows[view.name] = found.rows
    for ref in refs:
        start = {int(p): o for p, o in after[ref.name].items()}
        records = kafka_io.read(settings.kafka_bootstrap, ref.topic, start)
        made = sum(1 for r in records if r.payload and r.payload["op"] in ("c", "u", "d"))
        stored = spark.read.format("delta").load(history_of(ref.path(str(lake))))
        # A replayed batch would have stored some twice.
        assert stored.where(F.col("_kafka_offset").isNotNull()).count() == made > 0, ref.name
    return rows


def _orders_out_of_order(dsn: str) -> list[tuple[int, str]]:
    """Two orders whose event time (placed_at) is behind the newest, by two minutes (within the
    windows' lateness) and by two hours, then shipped: their ids and times (UTC text)."""
    placed = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        for behind in ("2 minutes", "2 hours"):
            row = conn.execute(
                "INSERT INTO public.orders (customer_id, status, total, placed_at, updated_at)"
                " SELECT NULL, 'pending', 7.25, max(placed_at) - %s::interval, now()"
                " FROM public.orders RETURNING id, placed_at AT TIME ZONE 'UTC'",
                (behind,),
            ).fetchone()
            assert row is not None
            placed.append((int(row[0]), row[1].isoformat(sep=" ")))
        for order, _ in placed:
            conn.execute(
                "UPDATE public.orders SET status = 'shipped', updated_at = now() WHERE id = %s",
                (order,),
            )
    return placed


def _customer_moves_after_an_order(dsn: str) -> tuple[int, int, str, str]:
    """An order placed, its customer moved to another country, the order updated: (the order's
    id, the customer's, the country before, after)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        customer, before = conn.execute(
            "SELECT id, country FROM public.customers WHERE country IS NOT NULL LIMIT 1"
        ).fetchone() or (None, None)
        assert customer is not None
        (order,) = conn.execute(
            "INSERT INTO public.orders (customer_id, status, total, placed_at, updated_at)"
            " VALUES (%s, 'pending', 12.50, now(), now()) RETURNING id",
            (customer,),
        ).fetchone() or (None,)
        conn.execute("UPDATE public.customers SET country = 'XX' WHERE id = %s", (customer,))
        conn.execute("UPDATE public.orders SET status = 'paid' WHERE id = %s", (order,))
    return int(order), int(customer), str(before), "XX"


def test_shop_snapshot_and_demo_load(
    settings: Settings, admin_dsn: str, spark: SparkSession, tmp_path: Path
) -> None:
    changelake("connectors", "apply")
    env = {
        **os.environ,
        "CHANGELAKE_LAKE": str(tmp_path / "lake"),
        "CHANGELAKE_CHECKPOINTS": str(tmp_path / "checkpoints"),
    }
    seed(admin_dsn, 300, progress=lambda _: None)

    snapshot = changelake_here("run", "--once", env=env)  # as a process: test_beyond_one_machine
    assert "customers: snapshot" in snapshot.stdout, snapshot.stdout
    _assert_shop_equal(spark, admin_dsn, tmp_path / "lake")
    snapshotted = covered(spark, f"{tmp_path}/lake/shop/public/customers")
    orders_then = covered(spark, f"{tmp_path}/lake/shop/public/orders")
    lines_then = covered(spark, f"{tmp_path}/lake/shop/public/order_lines")
    assert snapshotted is not None and orders_then is not None and lines_then is not None
    customers_then = spark.read.format("delta").load(f"{tmp_path}/lake/shop/public/customers")
    count_then = customers_then.count()

    load = run_load(admin_dsn, rate=40, seconds=8, progress=lambda _: None)
    assert load.transactions > 100
    order, customer, country_then, country_now = _customer_moves_after_an_order(admin_dsn)
    in_time, too_late = _orders_out_of_order(admin_dsn)
    applied = changelake_here("run", "--once", env=env)
    assert "changes from" in applied.stdout, applied.stdout
    # The first run computed customer_revenue whole; this one only the groups changes touched.
    assert "view customer_revenue: computed whole" in snapshot.stdout, snapshot.stdout
    rounds = re.findall(r"view customer_revenue: ([\d,]+) groups recomputed", applied.stdout)
    assert rounds, applied.stdout
    _assert_shop_equal(spark, admin_dsn, tmp_path / "lake")
    _assert_open_to_other_readers(admin_dsn, tmp_path / "lake")
    after = {
        "customers": snapshotted.offsets,
        "orders": orders_then.offsets,
        "order_lines": lines_then.offsets,
    }
    groups = _assert_views(spark, settings, tmp_path / "lake", after)["customer_revenue"]
    assert 0 < int(rounds[0].replace(",", "")) < groups, applied.stdout  # not every group
    # The order's changes keep the country its customer had at each: the move came between.
    enriched = changelake_here(
        "query",
        f"SELECT _cdc_op, status, customer_country FROM orders_enriched WHERE id = {order} "
        "ORDER BY _cdc_lsn",
        "--json",
        env=env,
    ).stdout
    assert json.loads(enriched) == [
        {"_cdc_op": "c", "status": "pending", "customer_country": country_then},
        {"_cdc_op": "u", "status": "paid", "customer_country": country_now},
    ]
    # Their revenue moved with them: the aggregate's row has the new country, and the source's
    # own count of their orders.
    revenue = changelake_here(
        "query",
        f"SELECT country, orders FROM customer_revenue WHERE id = {customer}",
        "--json",
        env=env,
    ).stdout
    with psycopg.connect(admin_dsn) as conn:
        placed = conn.execute(
            "SELECT count(*) FROM public.orders WHERE customer_id = %s", (customer,)
        ).fetchone()
    assert placed is not None
    assert json.loads(revenue) == [{"country": country_now, "orders": placed[0]}]
    # Out of order: one within the 5 minutes' lateness corrects its window; one two hours late
    # is counted as late there, not dropped (verify above: figures + late = the table).
    # Both shipped at once: two minutes after being placed (within the hour: matched) and two
    # hours after (expired, once the watermark passed the hour).
    (order_in_time, when_in_time), (order_late, when_late) = in_time, too_late
    shown = changelake_here(
        "query",
        "SELECT w.late > 0 AS late, s.state FROM revenue_per_minute w JOIN time_to_ship s "
        "ON s.first_at >= w.window_start AND s.first_at < w.window_end "
        f"WHERE s.id IN ({order_in_time}, {order_late}) ORDER BY s.first_at DESC",
        "--json",
        env=env,
    ).stdout
    assert json.loads(shown) == [
        {"late": False, "state": "matched"},
        {"late": True, "state": "expired"},
    ], (when_in_time, when_late)
    # Queryable by its name: as of a past LSN (the snapshot's), the customers as they were then.
    at = snapshotted.max_lsn
    then = (
        f"SELECT count(*) AS n FROM customers_history WHERE _valid_from_lsn <= {at} "
        f"AND (_valid_to_lsn IS NULL OR _valid_to_lsn > {at})"
    )
    shown = changelake_here("query", then, "--json", env=env).stdout
    assert json.loads(shown) == [{"n": count_then}]  # not the customers the load added
    _assert_reads_at_one_transaction(spark, admin_dsn, tmp_path / "lake", env)


BALANCE = (
    "SELECT count(*) AS orders, "
    "count(CASE WHEN o.total <> coalesce(l.s, 0) THEN 1 END) AS unbalanced FROM {o} o "
    "LEFT JOIN (SELECT order_id, sum(qty * unit_price) AS s FROM {l} GROUP BY order_id) l "
    "ON o.id = l.order_id"
)


def _assert_reads_at_one_transaction(
    spark: SparkSession, dsn: str, lake: Path, env: dict[str, str]
) -> None:
    """`query --consistent` (all caught up: the newest transaction) balances orders against
    their lines as the source does; `--as-of-lsn` the LSN of an order's own insert, inside the
    transaction that placed it with its lines, shows neither (it committed later), where a
    filter on the changes' own LSNs shows the order without its lines."""
    consistent = changelake_here(
        "query", BALANCE.format(o="orders", l="order_lines"), "--consistent", "--json", env=env
    )
    assert "read as of commit LSN" in consistent.stderr, consistent.stderr
    with psycopg.connect(dsn) as conn:
        source = conn.execute(BALANCE.format(o="public.orders", l="public.order_lines")).fetchone()
        placed = conn.execute("SELECT max(order_id) FROM public.order_lines").fetchone()
    assert source is not None and placed is not None
    assert json.loads(consistent.stdout) == [{"orders": source[0], "unbalanced": source[1]}]
    stored = spark.read.format("delta").load(history_of(f"{lake}/shop/public/orders"))
    inserted = stored.where((F.col("id") == placed[0]) & (F.col("_cdc_op") == "c")).first()
    assert inserted is not None and inserted["_cdc_tx"] is not None
    lsn = int(inserted["_cdc_lsn"])
    both = (
        f"SELECT (SELECT count(*) FROM orders WHERE id = {placed[0]}) AS orders, "
        f"(SELECT count(*) FROM order_lines WHERE order_id = {placed[0]}) AS lines"
    )
    at = changelake_here("query", both, "--as-of-lsn", str(lsn), "--json", env=env)
    assert json.loads(at.stdout) == [{"orders": 0, "lines": 0}], at.stderr
    lines = spark.read.format("delta").load(history_of(f"{lake}/shop/public/order_lines"))
    naive = lines.where((F.col("order_id") == placed[0]) & (F.col("_cdc_lsn") <= lsn)).count()
    assert naive == 0  # its lines came after the order in the transaction: the split is real
