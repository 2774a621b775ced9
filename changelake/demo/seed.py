"""Bulk-load the demo shop with COPY: customers, products, orders and their lines.

Re-runnable: each run appends after the highest id and SKU number already used (rows or
sequence, whichever is higher) and moves the identity sequences past what it wrote, so later
inserts that take their id from the sequence never collide with seeded rows.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from decimal import Decimal

import psycopg
from psycopg.rows import TupleRow

from changelake import progress
from changelake.demo import text
from changelake.demo.db import SHOP_TABLES, connect, friendly_errors, serial_sequence
from changelake.exceptions import ConfigError

Row = tuple[object, ...]
LONG_EVERY = 20  # every 20th customer and product gets a TOASTed text: exactly 5%
ORDERS_PER_CUSTOMER = (0, 1, 1, 2, 2, 2, 3, 3, 4)  # mean 2
STATUS_WEIGHTS = {"pending": 1, "paid": 2, "shipped": 2, "delivered": 6, "cancelled": 1}


@dataclass(frozen=True)
class SeedReport:
    customers: int
    products: int
    orders: int
    order_lines: int
    seconds: float
    customer_ids: range = field(repr=False)
    order_ids: range = field(repr=False)
    sku_numbers: range = field(repr=False)

    @property
    def rows(self) -> int:
        return self.customers + self.products + self.orders + self.order_lines

    def skus(self) -> list[str]:
        return [sku(n) for n in self.sku_numbers]

    def summary(self) -> str:
        rate = self.rows / self.seconds if self.seconds > 0 else 0.0
        return "\n".join(
            [
                f"seeded {self.rows:,} rows in {self.seconds:.1f} s ({rate:,.0f} rows/s)",
                f"  customers    {self.customers:>10,}",
                f"  products     {self.products:>10,}",
                f"  orders       {self.orders:>10,}",
                f"  order_lines  {self.order_lines:>10,}",
            ]
        )


def sku(number: int) -> str:
    return f"SKU-{number:07d}"


def seed(
    dsn: str, rows: int, *, seed: int = 42, progress: Callable[[str], None] = print
) -> SeedReport:
    """Append `rows` customers, max(10, rows // 10) products, ~2 orders per customer and 1-4 lines
    per order, in one transaction. The same seed and starting ids give the same data.

    `progress` gets a line every ~10% for large loads; the caller prints `summary()`."""
    if rows < 0:
        raise ConfigError(f"seed: rows must be >= 0, got {rows}")
    started = time.monotonic()
    with friendly_errors(dsn, "seeding the demo data"), connect(dsn) as conn:
        tick = _Progress(rows, progress, started)
        try:
            report = _seed(conn, rows, seed, tick)
        finally:
            tick.bar.close()
        conn.commit()
    return replace(report, seconds=time.monotonic() - started)


def _seed(conn: psycopg.Connection[TupleRow], rows: int, seed: int, tick: _Progress) -> SeedReport:
    cur = conn.cursor()
    # Writers wait while we read the starting points and copy; readers (Debezium) carry on.
    cur.execute(f"LOCK TABLE {', '.join(SHOP_TABLES)} IN SHARE ROW EXCLUSIVE MODE")
    first_customer = _next_id(cur, "public.customers")
    first_order = _next_id(cur, "public.orders")
    first_sku = _next_sku_number(cur)
    customer_ids = range(first_customer, first_customer + rows)
    sku_numbers = range(first_sku, first_sku + (max(10, rows // 10) if rows else 0))

    def rng(stream: str) -> random.Random:
        # Offsets in the seed keep a second run from repeating the first run's values.
        return random.Random(f"{seed}:{stream}:{first_customer}:{first_sku}")

    _copy(cur, "customers", _customers(rng("customers"), customer_ids), tick)
    prices = _copy_products(cur, rng("products"), sku_numbers, tick)
    lines, orders = _plan_orders(rng("orders"), customer_ids, first_order, prices)
    _copy(cur, "order_lines", lines, tick)
    _copy(cur, "orders", _orders(rng("order-meta"), orders, first_order), tick)
    order_ids = range(first_order, first_order + len(orders))
    for table, ids in (("public.customers", customer_ids), ("public.orders", order_ids)):
        if ids:
            cur.execute(f"SELECT setval({serial_sequence(table)}, %s)", (ids[-1],))
    return SeedReport(
        customers=len(customer_ids),
        products=len(sku_numbers),
        orders=len(orders),
        order_lines=tick.counts.get("order_lines", 0),
        seconds=0.0,
        customer_ids=customer_ids,
        order_ids=order_ids,
        sku_numbers=sku_numbers,
    )


def _next_id(cur: psycopg.Cursor[TupleRow], table: str) -> int:
    # The sequence can be ahead of max(id) (rows inserted then deleted): respect both.
    cur.execute(
        f"SELECT greatest((SELECT max(id) FROM {table}),"
        f" pg_sequence_last_value({serial_sequence(table)}::regclass), 0) + 1"
    )
    row = cur.fetchone()
    assert row is not None
    return int(row[0])


def _next_sku_number(cur: psycopg.Cursor[TupleRow]) -> int:
    cur.execute(
        "SELECT coalesce(max(substring(sku FROM 5)::bigint), 0) + 1 FROM public.products"
        " WHERE sku ~ '^SKU-[0-9]{1,18}$'"
    )
    row = cur.fetchone()
    assert row is not None
    return int(row[0])


def _customers(rng: random.Random, ids: range) -> Iterable[Row]:
    for cid in ids:
        name, handle = text.person(rng)
        created = text.past_time(rng)
        if (cid - ids.start) % LONG_EVERY == 0:
            notes: str | None = text.long_text(rng)
        else:
            notes = text.sentence(rng) if rng.random() < 0.5 else None
        yield (
            cid,
            text.email(rng, handle, cid),
            name if rng.random() > 0.02 else None,
            rng.choice(text.COUNTRIES) if rng.random() > 0.05 else None,
            text.balance(rng),
            text.profile(rng),
            notes,
            created,
            text.later(rng, created),
        )


def _copy_products(
    cur: psycopg.Cursor[TupleRow],
    rng: random.Random,
    numbers: range,
    tick: _Progress,
) -> list[tuple[str, Decimal]]:
    prices: list[tuple[str, Decimal]] = []

    def rows() -> Iterable[Row]:
        for n in numbers:
            price = text.money(rng, 99, 99_999)
            prices.append((sku(n), price))
            if (n - numbers.start) % LONG_EVERY == 0:
                description: str | None = text.long_text(rng)
            else:
                description = text.sentence(rng, 8, 30) if rng.random() < 0.8 else None
            in_stock = None if rng.random() < 0.02 else rng.random() < 0.85
            name = text.product_name(rng)
            yield (sku(n), name, description, price, text.tags(rng), in_stock, text.past_time(rng))

    _copy(cur, "products", rows(), tick)
    return prices


def _plan_orders(
    rng: random.Random, customers: range, first_order: int, prices: list[tuple[str, Decimal]]
) -> tuple[Iterable[Row], list[tuple[int, Decimal]]]:
    """Order lines (a generator) and, filled in as it runs, each order's (customer, total).

    Lines are written before orders so each order's total is known when the order is written,
    without holding all lines in memory."""
    orders: list[tuple[int, Decimal]] = []

    def lines() -> Iterable[Row]:
        for customer in customers:
            for _ in range(rng.choice(ORDERS_PER_CUSTOMER)):
                order_id = first_order + len(orders)
                total = Decimal("0.00")
                for line_no in range(1, rng.randint(1, 4) + 1):
                    item, price = rng.choice(prices)
                    qty = rng.randint(1, 5)
                    total += qty * price
                    yield (order_id, line_no, item, qty, price)
                orders.append((customer, total))

    return lines(), orders


def _orders(rng: random.Random, orders: list[tuple[int, Decimal]], first: int) -> Iterable[Row]:
    statuses, weights = list(STATUS_WEIGHTS), list(STATUS_WEIGHTS.values())
    for offset, (customer, total) in enumerate(orders):
        placed = text.past_time(rng)
        status = rng.choices(statuses, weights)[0]
        yield (first + offset, customer, status, total, placed, text.later(rng, placed))


COLUMNS = {  # what each COPY writes, in this order
    "customers": "id, email, name, country, balance, profile, notes, created_at, updated_at",
    "products": "sku, name, description, price, tags, in_stock, updated_at",
    "orders": "id, customer_id, status, total, placed_at, updated_at",
    "order_lines": "order_id, line_no, sku, qty, unit_price",
}


def _copy(cur: psycopg.Cursor[TupleRow], table: str, rows: Iterable[Row], tick: _Progress) -> None:
    pending = 0
    with cur.copy(f"COPY public.{table} ({COLUMNS[table]}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
            pending += 1
            if pending == 1024:  # counting in batches keeps the per-row cost down
                tick.add(table, pending)
                pending = 0
    tick.add(table, pending)


class _Progress:
    """A bar on a terminal; else a line every ~10% of the expected row count (about 8.1 rows per
    customer in all)."""

    def __init__(self, customers: int, out: Callable[[str], None], started: float) -> None:
        self.expected = max(1, int(customers * 8.1))
        self.step = max(self.expected // 10, 1) if customers >= 10_000 else self.expected * 2
        self.next_report = self.step
        self.done = 0
        self.counts: dict[str, int] = {}
        self.out = out
        self.started = started
        self.bar = progress.bar("seed", total=self.expected, unit="row")

    def add(self, table: str, rows: int) -> None:
        self.counts[table] = self.counts.get(table, 0) + rows
        self.done += rows
        self.bar.set_postfix_str(table, refresh=False)
        self.bar.update(rows)
        if self.bar.disable and self.done >= self.next_report:
            self.next_report += self.step
            pct = min(99, 100 * self.done // self.expected)
            elapsed = time.monotonic() - self.started
            self.out(f"seed: ~{pct}% ({self.done:,} rows, now {table}, {elapsed:.1f} s)")
