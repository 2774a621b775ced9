"""The load a chaos round runs while faults land: the demo workload, small bulk transactions
mixed in, on a thread of its own until the round's faults are over; and, for the fault that
stops Connect inside one, a big bulk transaction on demand."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Protocol

from pipelines import pg
from pipelines.chaos.bulk_stop import Bulk
from pipelines.demo.bulk import bulk_orders
from pipelines.demo.load import LoadReport, run_load
from pipelines.demo.ops import OPERATIONS, Mix, Pools
from pipelines.exceptions import ChangelakeError

FOREVER_S = 24 * 3600.0  # the round ends the load, not a duration
CHAOS_MIX: Mix = {**OPERATIONS, "bulk_orders": (bulk_orders, 1)}
BIG_BULK_ORDERS = 2000  # ~2,000 orders and ~4,000 lines: a second or more of Debezium's streaming


class Done(Protocol):
    @property
    def transactions(self) -> int: ...

    @property
    def row_changes(self) -> int: ...


class Workload(Protocol):
    def start(self) -> None: ...

    def stop(self) -> Done: ...

    def bulk(self) -> Bulk:
        """Commit one big bulk transaction beside the load, and say what it was."""
        ...


class BackgroundLoad:
    def __init__(self, dsn: str, rate: float, seed: int, say: Callable[[str], None]) -> None:
        self.dsn, self.rate, self.seed, self.say = dsn, rate, seed, say
        self.stopping = threading.Event()
        self.report: LoadReport | None = None
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="chaos-load", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        try:
            self.report = run_load(
                self.dsn,
                self.rate,
                FOREVER_S,
                seed=self.seed,
                progress=self._progress,
                stop=self.stopping.is_set,
                mix=CHAOS_MIX,
            )
        except BaseException as exc:  # handed to the caller of stop()
            self.failure = exc

    def _progress(self, line: str) -> None:
        if "connection" in line or "reconnected" in line:  # not the per-second lines
            self.say(f"  {line}")

    def stop(self) -> LoadReport:
        self.stopping.set()
        self.thread.join()
        if self.failure is not None:
            raise self.failure
        assert self.report is not None
        return self.report

    def bulk(self) -> Bulk:
        with pg.connect(self.dsn) as conn, conn.cursor() as cur:
            pools = Pools.load(cur)
            effect = bulk_orders(cur, random.Random(self.seed), pools, BIG_BULK_ORDERS)
        if effect is None:
            raise ChangelakeError("chaos: the shop has no customers or priced products to order")
        return Bulk(effect.xid, effect.rows, effect.copied)
