"""The workload's operations: each runs inside the caller's transaction and says what it changed.

Rows are picked at random by id (an index probe, cheap on any table size) and locked, so a row
deleted by someone else is simply skipped over; an operation that finds nothing to work on
returns `None` and the caller counts it as skipped.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal

import psycopg
from psycopg.rows import TupleRow

from changelake.demo import text
from changelake.demo.db import serial_sequence
from changelake.exceptions import ChangelakeError

Cursor = psycopg.Cursor[TupleRow]
LONG_NOTES_BYTES = 8000  # what the seed and the workload write as TOASTed notes is longer


@dataclass(frozen=True)
class Effect:
    """What one committed operation did, for the report and for the tests that check it."""

    rows: int
    new_customer: int | None = None
    new_order: int | None = None
    new_orders: tuple[int, ...] = ()  # a bulk's
    gone_customer: int | None = None
    gone_orders: tuple[int, ...] = ()
    moved_customer: tuple[int, int] | None = None


@dataclass
class Pools:
    """Keys worth targeting that an id probe would rarely hit: TOASTed customers and SKUs."""

    toasted: list[int] = field(default_factory=list)
    skus: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, cur: Cursor, size: int = 2000) -> Pools:
        cur.execute(
            "SELECT id FROM public.customers WHERE pg_column_size(notes) > %s"
            " ORDER BY random() LIMIT %s",
            (LONG_NOTES_BYTES, size),
        )
        toasted = [int(r[0]) for r in cur.fetchall()]
        cur.execute("SELECT sku FROM public.products ORDER BY random() LIMIT %s", (size,))
        return cls(toasted=toasted, skus=[str(r[0]) for r in cur.fetchall()])

    def forget(self, customer: int) -> None:
        if customer in self.toasted:
            self.toasted.remove(customer)


Op = Callable[[Cursor, random.Random, Pools], Effect | None]


def pick_id(cur: Cursor, table: Literal["customers", "orders"], rng: random.Random) -> int | None:
    """A random existing id, locked for this transaction, or None if the table is empty."""
    cur.execute(
        f"SELECT id FROM public.{table} WHERE id >= (SELECT min(id)"
        f" + floor(%s * (max(id) - min(id) + 1))::bigint FROM public.{table})"
        " ORDER BY id LIMIT 1 FOR UPDATE",
        (rng.random(),),
    )
    row = cur.fetchone()
    if row is None:  # the rows above the probe vanished meanwhile: take the lowest instead
        cur.execute(f"SELECT id FROM public.{table} ORDER BY id LIMIT 1 FOR UPDATE")
        row = cur.fetchone()
    return None if row is None else int(row[0])


def pick_customer(cur: Cursor, rng: random.Random, pools: Pools) -> int | None:
    """Half the time a customer with TOASTed notes, so updates that leave notes alone reach
    Debezium with the unchanged-TOAST placeholder."""
    if pools.toasted and rng.random() < 0.5:
        candidate = rng.choice(pools.toasted)
        cur.execute("SELECT id FROM public.customers WHERE id = %s FOR UPDATE", (candidate,))
        if cur.fetchone() is not None:
            return candidate
        pools.forget(candidate)
    return pick_id(cur, "customers", rng)


def insert_customer(cur: Cursor, rng: random.Random, pools: Pools) -> Effect:
    name, handle = text.person(rng)
    toasted = rng.random() < 0.05
    notes = text.long_text(rng) if toasted else text.sentence(rng)
    cur.execute(
        f"WITH n AS (SELECT nextval({serial_sequence('public.customers')}) AS id)"
        " INSERT INTO public.customers"
        " (id, email, name, country, balance, profile, notes, created_at, updated_at)"
        " SELECT n.id, %s || '.' || n.id || '@' || %s, %s, %s, %s, %s::jsonb, %s, now(), now()"
        " FROM n RETURNING id",
        (
            handle,
            rng.choice(text.DOMAINS),
            name,
            rng.choice(text.COUNTRIES),
            text.balance(rng),
            text.profile(rng),
            notes,
        ),
    )
    customer = _returned_id(cur)
    if toasted:
        pools.toasted.append(customer)
    return Effect(rows=1, new_customer=customer)


def insert_order(cur: Cursor, rng: random.Random, pools: Pools) -> Effect | None:
    return _place_order(cur, rng, pools, charge=False)


def purchase(cur: Cursor, rng: random.Random, pools: Pools) -> Effect | None:
    """One transaction across three tables: the order, its lines and the customer's balance."""
    return _place_order(cur, rng, pools, charge=True)


def _place_order(cur: Cursor, rng: random.Random, pools: Pools, *, charge: bool) -> Effect | None:
    customer = pick_customer(cur, rng, pools) if charge else pick_id(cur, "customers", rng)
    if customer is None or not pools.skus:
        return None
    wanted = rng.sample(pools.skus, k=min(len(pools.skus), rng.randint(1, 4)))
    cur.execute(
        "SELECT sku, price FROM public.products WHERE sku = ANY(%s) AND price IS NOT NULL",
        (wanted,),
    )
    lines = [(str(sku), rng.randint(1, 5), Decimal(price)) for sku, price in cur.fetchall()]
    if not lines:
        return None
    total = sum((qty * price for _, qty, price in lines), Decimal("0.00"))
    cur.execute(
        "INSERT INTO public.orders (customer_id, status, total, placed_at, updated_at)"
        " VALUES (%s, 'pending', %s, now(), now()) RETURNING id",
        (customer, total),
    )
    order = _returned_id(cur)
    cur.executemany(
        "INSERT INTO public.order_lines (order_id, line_no, sku, qty, unit_price)"
        " VALUES (%s, %s, %s, %s, %s)",
        [(order, n, sku, qty, price) for n, (sku, qty, price) in enumerate(lines, start=1)],
    )
    rows = 1 + len(lines)
    if charge:
        cur.execute(
            "UPDATE public.customers SET balance = balance - %s, updated_at = now() WHERE id = %s",
            (total, customer),
        )
        rows += cur.rowcount
    return Effect(rows=rows, new_order=order)


def update_balance(cur: Cursor, rng: random.Random, pools: Pools) -> Effect | None:
    """Touches balance and updated_at only: the TOASTed notes stay as they are."""
    customer = pick_customer(cur, rng, pools)
    if customer is None:
        return None
    cur.execute(
        "UPDATE public.customers SET balance = balance + %s, updated_at = now() WHERE id = %s",
        (text.money(rng, -20_000, 20_000), customer),
    )
    return Effect(rows=cur.rowcount)


def update_notes(cur: Cursor, rng: random.Random, pools: Pools) -> Effect | None:
    customer = pick_customer(cur, rng, pools)
    if customer is None:
        return None
    roll = rng.random()
    notes = text.long_text(rng) if roll < 0.5 else text.sentence(rng) if roll < 0.9 else None
    cur.execute(
        "UPDATE public.customers SET notes = %s, updated_at = now() WHERE id = %s",
        (notes, customer),
    )
    pools.forget(customer)
    if roll < 0.5:
        pools.toasted.append(customer)
    return Effect(rows=cur.rowcount)


def update_product(cur: Cursor, rng: random.Random, pools: Pools) -> Effect | None:
    """Price and stock only: a TOASTed description stays as it is."""
    if not pools.skus:
        return None
    sku = rng.choice(pools.skus)
    cur.execute(
        "UPDATE public.products SET price = least(greatest(round(price * %s, 2), 0.50), 99999.99),"
        " in_stock = %s, updated_at = now() WHERE sku = %s",
        (Decimal(rng.randint(90, 110)) / 100, rng.random() < 0.85, sku),
    )
    if not cur.rowcount:  # deleted by someone else
        pools.skus.remove(sku)
        return None
    return Effect(rows=cur.rowcount)


def advance_order(cur: Cursor, rng: random.Random, pools: Pools) -> Effect | None:
    order = pick_id(cur, "orders", rng)
    if order is None:
        return None
    cur.execute(
        "UPDATE public.orders SET updated_at = now(), status = CASE"
        " WHEN %s AND status IN ('pending', 'paid') THEN 'cancelled'"
        " WHEN status = 'pending' THEN 'paid' WHEN status = 'paid' THEN 'shipped'"
        " WHEN status = 'shipped' THEN 'delivered' ELSE status END"
        " WHERE id = %s",
        (rng.random() < 0.1, order),
    )
    return Effect(rows=cur.rowcount)


def delete_order(cur: Cursor, rng: random.Random, pools: Pools) -> Effect | None:
    order = pick_id(cur, "orders", rng)
    if order is None:
        return None
    cur.execute("DELETE FROM public.order_lines WHERE order_id = %s", (order,))
    rows = cur.rowcount
    cur.execute("DELETE FROM public.orders WHERE id = %s", (order,))
    return Effect(rows=rows + cur.rowcount, gone_orders=(order,))


def delete_customer(cur: Cursor, rng: random.Random, pools: Pools) -> Effect | None:
    """The customer, their orders and those orders' lines, together."""
    customer = pick_id(cur, "customers", rng)
    if customer is None:
        return None
    cur.execute(
        "DELETE FROM public.order_lines WHERE order_id IN"
        " (SELECT id FROM public.orders WHERE customer_id = %s)",
        (customer,),
    )
    rows = cur.rowcount
    cur.execute("DELETE FROM public.orders WHERE customer_id = %s RETURNING id", (customer,))
    orders = tuple(int(r[0]) for r in cur.fetchall())
    cur.execute("DELETE FROM public.customers WHERE id = %s", (customer,))
    pools.forget(customer)
    return Effect(
        rows=rows + len(orders) + cur.rowcount, gone_customer=customer, gone_orders=orders
    )


def change_customer_key(cur: Cursor, rng: random.Random, pools: Pools) -> Effect | None:
    """A primary-key update (Debezium: a delete of the old key, a create of the new one), with
    the customer's orders following it. Half the time on a TOASTed row: then the create event
    carries the unchanged-TOAST placeholder for a key the sink has never seen."""
    old = pick_customer(cur, rng, pools)
    if old is None:
        return None
    cur.execute(
        f"UPDATE public.customers SET id = nextval({serial_sequence('public.customers')}),"
        " updated_at = now() WHERE id = %s RETURNING id",
        (old,),
    )
    new = _returned_id(cur)
    cur.execute(
        "UPDATE public.orders SET customer_id = %s, updated_at = now() WHERE customer_id = %s",
        (new, old),
    )
    if old in pools.toasted:
        pools.forget(old)
        pools.toasted.append(new)
    return Effect(rows=1 + cur.rowcount, moved_customer=(old, new))


def _returned_id(cur: Cursor) -> int:
    row = cur.fetchone()
    if row is None:  # RETURNING of a single-row write: only a broken schema gets here
        raise ChangelakeError(
            "Postgres returned no id for a row just written: is shop.sql applied?"
        )
    return int(row[0])


# name → (operation, weight): the mix of a busy shop, about 1% primary-key changes
Mix = dict[str, tuple[Op, int]]
OPERATIONS: Mix = {
    "insert_customer": (insert_customer, 8),
    "insert_order": (insert_order, 10),
    "purchase": (purchase, 10),
    "update_balance": (update_balance, 26),
    "update_notes": (update_notes, 4),
    "update_product": (update_product, 12),
    "advance_order": (advance_order, 18),
    "delete_order": (delete_order, 8),
    "delete_customer": (delete_customer, 3),
    "change_customer_key": (change_customer_key, 1),
}
