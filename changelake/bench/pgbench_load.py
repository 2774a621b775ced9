"""The benchmark's load: the demo shop's operation mix as pgbench scripts, paced by pgbench.

The Python workload (`demo load`) tracks every key it touches for the tests that check them, and
tops out near 180 transactions/s on two shared cores: the benchmark's steps then measured the
generator, not the pipeline. pgbench (Postgres' own C client, in the same Debian package as the
server) runs the same mix from several connections at thousands of transactions/s, paced on a
schedule (`--rate`) like the Python one. Each operation is one statement or one explicit
transaction that does nothing when its random row is gone, so no client ever stops on an error;
deadlocks between a delete and an order of the same customer are retried (`--max-tries`).
Statements go as prepared ones, each parsed and planned once per connection rather than once per
transaction: the server's share of the load, on the cores the pipeline shares, shrinks.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict

from changelake import pg
from changelake.exceptions import ChangelakeError

# Each connection has one transaction in flight: with the machine's cores busy a transaction
# takes ~8 ms, so four connections top out near 500/s (measured) and the step-up measured them.
CLIENTS = 16
THREADS = 2
# Unpaced, beside Kafka and Connect streaming it: 4,946 transactions/s (6,485 row changes/s) with
# the simple protocol, 6,210 (7,936) prepared. In `make bench` at f5f8d2d, simple, beside the
# pipeline too, its 4,000/s step reached 2,662.
PROTOCOL = "prepared"
MAX_TRIES = 5

_CUSTOMER = r"\set c random(:c_min, :c_max)"
# Half the time a customer with TOASTed notes (the seed gives every 20th one them), as the Python
# workload's `pick_customer` does, so updates that leave notes alone carry the placeholder.
_TOASTED_OR_ANY_CUSTOMER = "\n".join(
    (_CUSTOMER, r"\set t random(0, 1)", r"\set c :c - :t * ((:c - :c_min) % 20)")
)
_ORDER = r"\set o random(:o_min, :o_max)"
_SKU = r"\set s random(:s_min, :s_max)"


def _sku_text(number: str) -> str:
    """SQL for the SKU text of a number expression, as `seed.sku` writes it."""
    return f"'SKU-' || lpad(({number})::text, 7, '0')"


_SKU_TEXT = _sku_text(":s")
# An order's 1-4 lines, from consecutive SKUs that still exist and have a price.
_LINES = (
    "l AS (SELECT row_number() OVER () AS line_no, p.sku, 1 + (:s + g) % 5 AS qty, p.price"
    " FROM generate_series(0, :n - 1) g JOIN public.products p"
    f" ON p.sku = {_sku_text(':s + g')} WHERE p.price IS NOT NULL)"
)
_ORDER_OF_LINES = (
    "o AS (INSERT INTO public.orders (customer_id, status, total, placed_at, updated_at)"
    " SELECT :c, 'pending', sum(qty * price), now(), now() FROM l"
    " HAVING count(*) > 0 AND EXISTS (SELECT 1 FROM public.customers WHERE id = :c)"
    " RETURNING id, total)"
)
_INSERT_LINES = (
    "INSERT INTO public.order_lines (order_id, line_no, sku, qty, unit_price)"
    " SELECT o.id, l.line_no, l.sku, l.qty, l.price FROM o, l;"
)

# name → (script, weight): the weights of `changelake.demo.ops.OPERATIONS`, so the two loads
# write the same kinds of changes in the same proportions.
SCRIPTS: dict[str, tuple[str, int]] = {
    "insert_customer": (
        r"\set toasted random(1, 20)"
        "\nINSERT INTO public.customers"
        " (email, name, country, balance, profile, notes, created_at, updated_at)"
        " VALUES ('load.' || gen_random_uuid() || '@example.com', 'Load Customer',"
        " (ARRAY['DE', 'FR', 'US', 'JP', 'BR'])[1 + floor(random() * 5)::int],"
        ' round((random() * 1000)::numeric, 2), \'{"tier": "load"}\'::jsonb,'
        " CASE WHEN :toasted = 1 THEN repeat(md5(random()::text), 300) ELSE 'a short note' END,"
        " now(), now());",
        8,
    ),
    "insert_order": (
        f"{_CUSTOMER}\n{_SKU}\n\\set n random(1, 4)\n"
        f"WITH {_LINES}, {_ORDER_OF_LINES} {_INSERT_LINES}",
        10,
    ),
    "purchase": (  # the order, its lines and the customer's balance in one transaction
        f"{_TOASTED_OR_ANY_CUSTOMER}\n{_SKU}\n\\set n random(1, 4)\n"
        f"WITH {_LINES}, {_ORDER_OF_LINES},"
        " b AS (UPDATE public.customers SET balance = balance - (SELECT total FROM o),"
        " updated_at = now() WHERE id = :c AND EXISTS (SELECT 1 FROM o))"
        f" {_INSERT_LINES}",
        10,
    ),
    "update_balance": (  # balance and updated_at only: TOASTed notes stay unchanged
        f"{_TOASTED_OR_ANY_CUSTOMER}\n\\set cents random(-2000000, 2000000)\n"
        "UPDATE public.customers SET balance = balance + :cents / 100.0, updated_at = now()"
        " WHERE id = :c;",
        26,
    ),
    "update_notes": (
        f"{_TOASTED_OR_ANY_CUSTOMER}\n\\set roll random(0, 9)\n"
        "UPDATE public.customers SET notes = CASE WHEN :roll < 5"
        " THEN repeat(md5(random()::text), 300) WHEN :roll < 9 THEN 'a new short note' END,"
        " updated_at = now() WHERE id = :c;",
        4,
    ),
    "update_product": (  # price and stock only: a TOASTed description stays unchanged
        f"{_SKU}\n\\set pct random(90, 110)\n"
        "UPDATE public.products SET"
        " price = least(greatest(round(price * :pct / 100.0, 2), 0.50), 99999.99),"
        f" in_stock = random() < 0.85, updated_at = now() WHERE sku = {_SKU_TEXT};",
        12,
    ),
    "advance_order": (
        f"{_ORDER}\n"
        "UPDATE public.orders SET updated_at = now(), status = CASE"
        " WHEN random() < 0.1 AND status IN ('pending', 'paid') THEN 'cancelled'"
        " WHEN status = 'pending' THEN 'paid' WHEN status = 'paid' THEN 'shipped'"
        " WHEN status = 'shipped' THEN 'delivered' ELSE status END WHERE id = :o;",
        18,
    ),
    "delete_order": (
        f"{_ORDER}\n"
        "WITH l AS (DELETE FROM public.order_lines WHERE order_id = :o)"
        " DELETE FROM public.orders WHERE id = :o;",
        8,
    ),
    "delete_customer": (  # the customer, their orders and those orders' lines
        f"{_CUSTOMER}\n"
        "WITH o AS (DELETE FROM public.orders WHERE customer_id = :c RETURNING id),"
        " l AS (DELETE FROM public.order_lines WHERE order_id IN (SELECT id FROM o))"
        " DELETE FROM public.customers WHERE id = :c;",
        3,
    ),
    "change_customer_key": (  # Debezium: a delete of the old key and a create of the new one
        f"{_TOASTED_OR_ANY_CUSTOMER}\n"
        "WITH n AS (UPDATE public.customers"
        " SET id = nextval(pg_get_serial_sequence('public.customers', 'id')), updated_at = now()"
        " WHERE id = :c RETURNING id)"
        " UPDATE public.orders SET customer_id = (SELECT id FROM n), updated_at = now()"
        " WHERE customer_id = :c AND EXISTS (SELECT 1 FROM n);",
        1,
    ),
}

_PROCESSED = re.compile(r"number of transactions actually processed: (\d+)")
_FAILED = re.compile(r"number of failed transactions: (\d+)")
_RETRIED = re.compile(r"number of transactions retried: (\d+)")
FLUSH_WAIT_S = 10.0
APP_NAME = "changelake-bench-load"  # its connections, to wait for their exit
_ROW_CHANGES = (
    "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables"
    " WHERE schemaname = 'public'"
)
_RANGES = (
    "SELECT (SELECT min(id) FROM public.customers), (SELECT max(id) FROM public.customers),"
    " (SELECT min(id) FROM public.orders), (SELECT max(id) FROM public.orders),"
    " (SELECT min(substr(sku, 5)::int) FROM public.products),"
    " (SELECT max(substr(sku, 5)::int) FROM public.products)"
)


@dataclass(frozen=True)
class PgbenchRun:
    """What one paced run did: the same figures `demo load` reports, for the benchmark's steps."""

    transactions: int
    row_changes: int
    failed: int
    # Deadlocks retried: Postgres' statistics count the rolled-back attempt's rows too.
    retried: int
    seconds: float
    target_rate: float


def run_pgbench(
    pgbench: Path, dsn: str, rate: float, seconds: float, workdir: Path, *, seed: int
) -> PgbenchRun:
    """The mix at `rate` transactions/s for `seconds` on the database of `dsn`, which must hold
    seeded shop tables. Row changes are counted by Postgres itself (its table statistics)."""
    if rate <= 0 or seconds < 1:
        raise ChangelakeError(f"bench load: need rate > 0 and seconds >= 1 (rate={rate})")
    ranges, before = _ranges_and_changes(dsn)
    workdir.mkdir(parents=True, exist_ok=True)
    args = [str(pgbench), "--no-vacuum", f"--client={CLIENTS}", f"--jobs={THREADS}"]
    args += [f"--rate={rate:g}", f"--time={int(seconds)}", f"--max-tries={MAX_TRIES}"]
    args += [f"--random-seed={seed}", f"--protocol={PROTOCOL}"]
    args += [f"--define={name}={value}" for name, value in ranges.items()]
    for name, (script, weight) in SCRIPTS.items():
        path = workdir / f"{name}.sql"
        path.write_text(script + "\n")
        args.append(f"--file={path}@{weight}")
    done = subprocess.run(
        args,
        env={**os.environ, **_libpq_env(dsn), "PGAPPNAME": APP_NAME},
        capture_output=True,
        text=True,
        check=False,
    )
    processed, failed = _PROCESSED.search(done.stdout), _FAILED.search(done.stdout)
    retried = _RETRIED.search(done.stdout)
    if done.returncode != 0 or processed is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise ChangelakeError(f"bench load: pgbench failed (exit {done.returncode})", *tail)
    _stats_flushed(dsn)
    _, after = _ranges_and_changes(dsn)
    return PgbenchRun(
        transactions=int(processed.group(1)),
        row_changes=after - before,
        failed=int(failed.group(1)) if failed else 0,
        retried=int(retried.group(1)) if retried else 0,
        seconds=float(int(seconds)),
        target_rate=rate,
    )


def _stats_flushed(dsn: str) -> None:
    """Wait until pgbench's connections are gone: a backend hands Postgres the last of its
    table statistics as it exits, which can be after pgbench itself has returned."""
    deadline = time.monotonic() + FLUSH_WAIT_S
    with pg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
                " AND datname = current_database()",
                (APP_NAME,),
            ).fetchone()
            if not row or not row[0]:
                return
            time.sleep(0.05)
    raise ChangelakeError(f"bench load: pgbench's connections still open after {FLUSH_WAIT_S}s")


def _ranges_and_changes(dsn: str) -> tuple[dict[str, int], int]:
    with pg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(_RANGES).fetchone()
        if row is None or any(v is None for v in row):
            raise ChangelakeError("bench load: the shop tables are empty; seed them first")
        conn.execute("SELECT pg_stat_clear_snapshot()")  # read afresh, not this session's cache
        changes = conn.execute(_ROW_CHANGES).fetchone()
    names = ("c_min", "c_max", "o_min", "o_max", "s_min", "s_max")
    return dict(zip(names, (int(v) for v in row), strict=True)), int(changes[0] if changes else 0)


def _libpq_env(dsn: str) -> dict[str, str]:
    """The DSN as libpq's variables, so the password never shows in a process list."""
    parts = conninfo_to_dict(dsn)
    names = {"host": "PGHOST", "port": "PGPORT", "user": "PGUSER", "dbname": "PGDATABASE"}
    env = {var: str(parts[key]) for key, var in names.items() if parts.get(key)}
    if parts.get("password"):
        env["PGPASSWORD"] = str(parts["password"])
    return env
