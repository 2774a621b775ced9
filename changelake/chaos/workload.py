"""The load a chaos round runs while faults land: the demo workload, small bulk transactions
mixed in, on a thread of its own until the round's faults are over; and, for the fault that
stops Connect inside one, a big bulk transaction on demand."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

from changelake import pg
from changelake.chaos.bulk_stop import Bulk
from changelake.demo.bulk import bulk_orders
from changelake.demo.load import LoadReport, run_load
from changelake.demo.ops import OPERATIONS, Mix, Pools
from changelake.exceptions import ChangelakeError

FOREVER_S = 24 * 3600.0  # the round ends the load, not a duration
CHAOS_MIX: Mix = {**OPERATIONS, "bulk_orders": (bulk_orders, 1)}
BIG_BULK_ORDERS = 2000  # ~2,000 orders and ~4,000 lines: a second or more of Debezium's streaming


class Done(Protocol):
    @property
    def transactions(self) -> int: ...

    @property
    def row_changes(self) -> int: ...


PAUSE_TIMEOUT_S = 60.0  # a transaction in flight ends well within this


class Gate:
    """Where a load's thread waits between two transactions while a fault holds it closed."""

    def __init__(self) -> None:
        self.open, self.waiting = threading.Event(), threading.Event()
        self.open.set()

    def passed(self, stopping: threading.Event) -> bool:
        """Called between transactions: waits while closed; True once the load should stop."""
        if not self.open.is_set():
            self.waiting.set()
            while not self.open.wait(0.1) and not stopping.is_set():
                pass
            self.waiting.clear()
        return stopping.is_set()

    @contextmanager
    def closed(self, thread: threading.Thread) -> Iterator[None]:
        """No transaction of the load commits inside: its thread waits between two."""
        self.open.clear()
        try:
            if thread.is_alive() and not self.waiting.wait(PAUSE_TIMEOUT_S):
                raise ChangelakeError(f"chaos: the load did not pause in {PAUSE_TIMEOUT_S:.0f}s")
            yield
        finally:
            self.open.set()


class Workload(Protocol):
    def start(self) -> None: ...

    def stop(self) -> Done: ...

    def paused(self) -> AbstractContextManager[None]:
        """A context in which none of the load's transactions commits."""
        ...

    def bulk(self) -> Bulk:
        """Commit one big bulk transaction beside the load, and say what it was."""
        ...


class BackgroundLoad:
    def __init__(self, dsn: str, rate: float, seed: int, say: Callable[[str], None]) -> None:
        self.dsn, self.rate, self.seed, self.say = dsn, rate, seed, say
        self.stopping, self.gate = threading.Event(), Gate()
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
                stop=lambda: self.gate.passed(self.stopping),
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

    @contextmanager
    def paused(self) -> Iterator[None]:
        with self.gate.closed(self.thread):
            yield

    def bulk(self) -> Bulk:
        with pg.connect(self.dsn) as conn, conn.cursor() as cur:
            pools = Pools.load(cur)
            effect = bulk_orders(cur, random.Random(self.seed), pools, BIG_BULK_ORDERS)
        if effect is None:
            raise ChangelakeError("chaos: the shop has no customers or priced products to order")
        return Bulk(effect.xid, effect.rows, effect.copied)
