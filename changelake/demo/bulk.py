"""A bulk transaction, as a data load or a nightly batch job makes one: orders by COPY, their
lines by COPY and by one INSERT … SELECT, and one UPDATE of all the new orders.

What makes it matter: COPY writes one WAL record per page of tuples (a multi-insert), so many
change events share one LSN; a CDC pipeline that resumes by LSN must count within it. The chaos
workload mixes small bulks in, and the chaos fault that stops Connect inside one runs a big one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from decimal import Decimal

from changelake import pg
from changelake.demo.ops import Cursor, Effect, Pools, pick_id
from changelake.demo.seed import COLUMNS

SMALL = 20  # orders per bulk in the chaos workload's mix


@dataclass(frozen=True)
class BulkEffect(Effect):
    xid: int = 0
    copied: tuple[int, int] = (0, 0)  # the WAL range the COPY statements wrote, in bytes


def bulk_orders(
    cur: Cursor, rng: random.Random, pools: Pools, orders: int = SMALL
) -> BulkEffect | None:
    customer = pick_id(cur, "customers", rng)
    priced = _priced(cur, pools, rng)
    if customer is None or not priced:
        return None
    cur.execute(
        "SELECT nextval(pg_get_serial_sequence('public.orders', 'id')) FROM generate_series(1, %s)",
        (orders,),
    )
    ids = [int(r[0]) for r in cur.fetchall()]
    lines = [
        (order, n, *rng.choice(priced), rng.randint(1, 4))
        for order in ids
        for n in range(1, rng.randint(1, 3) + 1)
    ]
    before = pg.wal_insert_lsn(cur)
    with cur.copy(f"COPY public.orders ({COLUMNS['orders']}) FROM STDIN") as copy:
        for order in ids:
            copy.write_row((order, customer, "pending", Decimal("0.00"), "now", "now"))
    with cur.copy(f"COPY public.order_lines ({COLUMNS['order_lines']}) FROM STDIN") as copy:
        for order, n, sku, price, qty in lines[::2]:
            copy.write_row((order, n, sku, qty, price))
    copied = (before, pg.wal_insert_lsn(cur))
    rest = lines[1::2]
    cur.execute(
        "INSERT INTO public.order_lines (order_id, line_no, sku, unit_price, qty)"
        " SELECT * FROM unnest(%s::bigint[], %s::int[], %s::text[], %s::numeric[], %s::int[])",
        [list(column) for column in zip(*rest, strict=True)] if rest else [[], [], [], [], []],
    )
    cur.execute(
        "UPDATE public.orders o SET status = 'paid', updated_at = now(),"
        " total = (SELECT sum(qty * unit_price) FROM public.order_lines l WHERE l.order_id = o.id)"
        " WHERE o.id = ANY(%s)",
        (ids,),
    )
    return BulkEffect(
        rows=2 * len(ids) + len(lines),
        new_orders=tuple(ids),
        xid=pg.current_xid(cur),
        copied=copied,
    )


def _priced(cur: Cursor, pools: Pools, rng: random.Random) -> list[tuple[str, Decimal]]:
    wanted = rng.sample(pools.skus, k=min(len(pools.skus), 20))
    cur.execute(
        "SELECT sku, price FROM public.products WHERE sku = ANY(%s) AND price IS NOT NULL",
        (wanted,),
    )
    return [(str(sku), Decimal(price)) for sku, price in cur.fetchall()]
