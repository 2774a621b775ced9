"""The demo seeder and workload against a real Postgres holding schemas/shop.sql.

Other tests use the same tables, so these assert on deltas and on the rows they wrote.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg.rows import TupleRow

from changelake.demo.load import LoadKeys, run_load
from changelake.demo.seed import seed

pytestmark = pytest.mark.stack

TABLES = ("customers", "products", "orders", "order_lines")


def _scalar(conn: psycopg.Connection[TupleRow], query: str, *args: object) -> Any:
    row = conn.execute(query, args or None).fetchone()
    assert row is not None
    return row[0]


def _counts(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        return {t: _scalar(conn, f"SELECT count(*) FROM public.{t}") for t in TABLES}


def test_seed_adds_the_requested_rows(admin_dsn: str) -> None:
    before = _counts(admin_dsn)
    report = seed(admin_dsn, 200, progress=lambda _: None)

    after = _counts(admin_dsn)
    assert (report.customers, report.products) == (200, 20)
    assert 200 <= report.orders <= 600
    assert report.orders <= report.order_lines <= 4 * report.orders
    assert {t: after[t] - before[t] for t in TABLES} == {
        "customers": 200,
        "products": 20,
        "orders": report.orders,
        "order_lines": report.order_lines,
    }
    assert report.summary().startswith(f"seeded {report.rows:,} rows")
    with psycopg.connect(admin_dsn) as conn:
        first, last = report.customer_ids[0], report.customer_ids[-1]
        ids = "id BETWEEN %s AND %s"
        assert (
            _scalar(conn, f"SELECT count(*) FROM public.customers WHERE {ids}", first, last) == 200
        )
        skus = report.skus()
        assert len(set(skus)) == 20
        assert _scalar(conn, "SELECT count(*) FROM public.products WHERE sku = ANY(%s)", skus) == 20


def test_seed_stores_long_texts_out_of_line(admin_dsn: str) -> None:
    report = seed(admin_dsn, 200, progress=lambda _: None)

    with psycopg.connect(admin_dsn) as conn:
        # > 8000 bytes on disk: neither inline nor compressed, i.e. TOASTed as written.
        toasted = _scalar(
            conn,
            "SELECT count(*) FROM public.customers"
            " WHERE id BETWEEN %s AND %s AND pg_column_size(notes) > 8000",
            report.customer_ids[0],
            report.customer_ids[-1],
        )
        assert toasted == 10  # every 20th customer
        described = _scalar(
            conn,
            "SELECT count(*) FROM public.products"
            " WHERE sku = ANY(%s) AND pg_column_size(description) > 8000",
            report.skus(),
        )
        assert described == 1


def test_seed_moves_the_sequences_and_runs_again(admin_dsn: str) -> None:
    first = seed(admin_dsn, 30, progress=lambda _: None)
    second = seed(admin_dsn, 30, progress=lambda _: None)

    assert second.customer_ids[0] > first.customer_ids[-1]
    assert second.order_ids[0] > first.order_ids[-1]
    assert second.sku_numbers[0] > first.sku_numbers[-1]
    with psycopg.connect(admin_dsn) as conn:
        new_id = _scalar(
            conn,
            "INSERT INTO public.customers (email) VALUES ('seq-check@example.com') RETURNING id",
        )
        order_id = _scalar(conn, "INSERT INTO public.orders (status) VALUES ('x') RETURNING id")
        conn.rollback()  # the inserts proved the point; leave no rows behind
    assert isinstance(new_id, int)
    assert new_id > second.customer_ids[-1]
    assert isinstance(order_id, int)
    assert order_id > second.order_ids[-1]


def test_load_reports_what_the_database_shows(admin_dsn: str) -> None:
    seed(admin_dsn, 100, progress=lambda _: None)  # something to update and delete
    lines: list[str] = []

    report = run_load(admin_dsn, rate=40, seconds=3, progress=lines.append)

    assert 90 <= report.attempts <= 121, "paced at 40/s for 3 s"
    assert sum(report.operations.values()) == report.transactions
    assert report.row_changes >= report.transactions
    updates = ("update_balance", "update_notes", "update_product", "advance_order")
    assert sum(report.operations.get(kind, 0) for kind in updates) >= 1
    assert len(lines) >= 2, "a progress line about every second"
    _assert_keys_match(admin_dsn, report.keys)


def _assert_keys_match(dsn: str, keys: LoadKeys) -> None:
    with psycopg.connect(dsn) as conn:

        def present(table: str, ids: set[int] | frozenset[int]) -> int:
            query = f"SELECT count(*) FROM public.{table} WHERE id = ANY(%s)"
            return int(_scalar(conn, query, list(ids)))

        assert present("customers", keys.inserted_customers) == len(keys.inserted_customers)
        assert present("customers", keys.deleted_customers) == 0
        assert present("customers", {old for old, _ in keys.key_changes}) == 0
        assert present("orders", keys.inserted_orders) == len(keys.inserted_orders)
        assert present("orders", keys.deleted_orders) == 0
        orphans = _scalar(
            conn,
            "SELECT count(*) FROM public.order_lines WHERE order_id = ANY(%s)",
            list(keys.deleted_orders),
        )
        assert orphans == 0
        lined = _scalar(
            conn,
            "SELECT count(DISTINCT order_id) FROM public.order_lines WHERE order_id = ANY(%s)",
            list(keys.inserted_orders),
        )
        assert lined == len(keys.inserted_orders)
