"""A workload on one test table, on a thread of its own: the chaos and repair tests' load."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from changelake import pg
from changelake.chaos.bulk_stop import Bulk
from changelake.chaos.workload import Gate

BULK_ROWS = 8000  # a bulk: a COPY that Debezium streams for a few seconds (SLOW_ACKS)
BULK_BASE = 50_000_000  # the bulks' keys, apart from the churn's own
CHURN_FIELDS = {"name": "text", "qty": "numeric"}  # what the tests index of the table


def churn_table(table: str, seeded: int) -> list[str]:
    """The DDL of a table Churn works on, with ids 1..`seeded` in it."""
    return [
        f"CREATE TABLE public.{table} (id int PRIMARY KEY, name text, qty numeric(12,2))",
        f"INSERT INTO public.{table} SELECT i, 'seed ' || i, i FROM generate_series(1, {seeded}) i",
    ]


class Churn:
    """Inserts, updates, deletes, key changes and now and then a multi-row statement on one
    table, one per transaction, surviving a Postgres restart by reconnecting; and a big bulk
    transaction on demand."""

    def __init__(self, dsn: str, table: str, keys: int, seed: int, rate: float = 20.0) -> None:
        """`table` is (id int PRIMARY KEY, name text, qty numeric); updates, deletes and key
        changes pick ids 1..`keys`."""
        self.dsn, self.table, self.keys, self.rate = dsn, table, keys, rate
        self.rng = random.Random(seed)
        self.next_id = 100_000 * (seed % 1000 + 1)
        self.transactions = self.row_changes = self.bulks = 0
        self.stopping, self.gate = threading.Event(), Gate()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> Churn:
        self.stopping.set()
        self.thread.join()
        return self

    @contextmanager
    def paused(self) -> Iterator[None]:
        with self.gate.closed(self.thread):
            yield

    def _run(self) -> None:
        conn: psycopg.Connection[tuple[object, ...]] | None = None
        while not self.gate.passed(self.stopping):
            try:
                conn = conn or psycopg.connect(self.dsn, autocommit=True, connect_timeout=2)
                self.row_changes += conn.execute(*self._statement()).rowcount
                self.transactions += 1
            except psycopg.OperationalError:
                conn = None  # Postgres restarting: the statement in flight was rolled back
            time.sleep(1 / self.rate)

    def _statement(self) -> tuple[str, tuple[object, ...]]:
        t, pick = f"public.{self.table}", self.rng.randrange(1, self.keys + 1)
        kind = self.rng.choice(["insert", "update", "update", "delete", "key", "many"])
        if kind == "many":  # several rows in one statement, so they may share an LSN
            self.next_id += 10
            return (
                f"INSERT INTO {t} SELECT i, 'many', 2.5 FROM generate_series(%s, %s) i",
                (self.next_id - 9, self.next_id),
            )
        if kind == "insert":
            self.next_id += 1
            return f"INSERT INTO {t} VALUES (%s, 'new', 1.25)", (self.next_id,)
        if kind == "update":
            return f"UPDATE {t} SET qty = qty + 0.01, name = name || '+' WHERE id = %s", (pick,)
        if kind == "delete":
            return f"DELETE FROM {t} WHERE id = %s", (pick,)
        self.next_id += 1
        return f"UPDATE {t} SET id = %s WHERE id = %s", (self.next_id, pick)

    def bulk(self) -> Bulk:
        """A COPY of new rows, then one UPDATE of many (the seeded rows ending in the round's
        digit), in one transaction."""
        self.bulks += 1  # called from the fault's thread: its keys are its own
        first = BULK_BASE + self.bulks * BULK_ROWS
        t = f"public.{self.table}"
        with pg.connect(self.dsn) as conn, conn.cursor() as cur:
            before = pg.wal_insert_lsn(cur)
            with cur.copy(f"COPY {t} (id, name, qty) FROM STDIN") as copy:
                for i in range(first - BULK_ROWS + 1, first + 1):
                    copy.write_row((i, f"bulk {i}", i % 100))
            copied = (before, pg.wal_insert_lsn(cur))
            updated = cur.execute(
                f"UPDATE {t} SET qty = qty + 1 WHERE id <= %s AND id %% 10 = %s",
                (self.keys, self.rng.randrange(10)),
            ).rowcount
            return Bulk(pg.current_xid(cur), BULK_ROWS + updated, copied)
