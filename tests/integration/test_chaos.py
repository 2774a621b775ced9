"""The short form of `make chaos`: one round of all five faults while a workload churns the
test's own table; `changelake verify` and the tests' own comparison both find nothing."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from pipelines.chaos.faults import KINDS
from pipelines.chaos.runner import Chaos, ChaosOptions
from pipelines.settings import Settings
from tests.integration.pipeline_fixtures import Pipeline

pytestmark = pytest.mark.stack
SEEDED = 300


class Churn:
    """Inserts, updates, deletes and key changes on one table, one per transaction, surviving
    a Postgres restart by reconnecting."""

    def __init__(self, dsn: str, table: str, seed: int, rate: float = 20.0) -> None:
        self.dsn, self.table, self.rate = dsn, table, rate
        self.rng = random.Random(seed)
        self.next_id = 100_000 * (seed % 1000 + 1)
        self.transactions = self.row_changes = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> Churn:
        self.stopping.set()
        self.thread.join()
        return self

    def _run(self) -> None:
        conn: psycopg.Connection[tuple[object, ...]] | None = None
        while not self.stopping.is_set():
            try:
                conn = conn or psycopg.connect(self.dsn, autocommit=True, connect_timeout=2)
                self.row_changes += conn.execute(*self._statement()).rowcount
                self.transactions += 1
            except psycopg.OperationalError:
                conn = None  # Postgres restarting: the statement in flight was rolled back
            time.sleep(1 / self.rate)

    def _statement(self) -> tuple[str, tuple[object, ...]]:
        t, pick = f"public.{self.table}", self.rng.randrange(1, SEEDED + 1)
        kind = self.rng.choice(["insert", "update", "update", "delete", "key"])
        if kind == "insert":
            self.next_id += 1
            return f"INSERT INTO {t} VALUES (%s, 'new', 1.25)", (self.next_id,)
        if kind == "update":
            return f"UPDATE {t} SET qty = qty + 0.01, name = name || '+' WHERE id = %s", (pick,)
        if kind == "delete":
            return f"DELETE FROM {t} WHERE id = %s", (pick,)
        self.next_id += 1
        return f"UPDATE {t} SET id = %s WHERE id = %s", (self.next_id, pick)


def test_one_round_of_every_fault_leaves_lake_and_index_equal(
    pipeline: Callable[..., Pipeline], unique: str, settings: Settings, tmp_path: Path
) -> None:
    t = f"chaos_{unique}"
    p = pipeline(
        [t],
        [
            f"CREATE TABLE public.{t} (id int PRIMARY KEY, name text, qty numeric(12,2))",
            f"INSERT INTO public.{t} SELECT i, 'seed ' || i, i FROM generate_series(1, {SEEDED}) i",
        ],
        search={t: {"name": "text", "qty": "numeric"}},
    )
    p.caught_up()
    options = ChaosOptions(rounds=1, rate=20, seed=5, gap_s=(1.0, 4.0), outage_s=(3.0, 8.0))

    def churn(seed: int) -> Churn:
        return Churn(p.dsn, t, seed, options.rate)

    chaos = Chaos(settings, p.env, churn, tmp_path / "chaos", print)
    summary = chaos.run(options)

    assert dict(summary.faults) == dict.fromkeys(KINDS, 1)
    (round_,) = summary.rounds
    assert round_.row_changes > 50, "the workload must have changed rows around the faults"
    assert round_.rows_compared >= 2 * 200  # the table and its index, compared row by row
    assert summary.differences == 0, round_.report
    p.assert_equal(t, ["id"])  # and by the tests' own comparison, not only verify's
