"""A paced OLTP workload on the demo shop: one transaction per operation, at a steady rate.

Pacing follows a schedule (operation i is due at start + i / rate on the monotonic clock), so
the achieved rate does not drift with how long each transaction takes.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import psycopg
from psycopg import errors
from psycopg.rows import TupleRow

from changelake.demo.db import connect, friendly_errors
from changelake.demo.ops import OPERATIONS, Effect, Mix, Pools
from changelake.exceptions import ConfigError

# Lost races with other writers: the transaction is rolled back and the workload carries on.
TRANSIENT = (
    errors.DeadlockDetected,
    errors.SerializationFailure,
    errors.LockNotAvailable,
    errors.UniqueViolation,
)
RECONNECT_EVERY_S = 0.5
MAX_BACKLOG_SECONDS = 1.0  # after a stall, skip missed slots rather than burst to catch up


@dataclass(frozen=True)
class LoadKeys:
    """The keys the workload created and removed (final ids, after any key changes)."""

    inserted_customers: frozenset[int] = frozenset()
    deleted_customers: frozenset[int] = frozenset()
    inserted_orders: frozenset[int] = frozenset()
    deleted_orders: frozenset[int] = frozenset()
    key_changes: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class LoadReport:
    operations: Mapping[str, int]
    transactions: int
    row_changes: int
    skipped: int
    failed: int
    seconds: float
    target_rate: float
    keys: LoadKeys = field(default_factory=LoadKeys, repr=False, compare=False)
    reconnects: int = 0

    @property
    def attempts(self) -> int:
        """Operations started: committed, skipped (nothing to work on) or rolled back."""
        return self.transactions + self.skipped + self.failed

    @property
    def rate(self) -> float:
        """Achieved operations per second: what the pacing aims at `target_rate`."""
        return self.attempts / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        lines = [
            f"load: {self.attempts:,} operations in {self.seconds:.1f} s"
            f" ({self.rate:.1f}/s, target {self.target_rate:g}):"
            f" {self.transactions:,} transactions committed, {self.row_changes:,} row changes",
        ]
        lines += [f"  {name:<20} {n:>8,}" for name, n in sorted(self.operations.items())]
        lines.append(f"  {'skipped (no row)':<20} {self.skipped:>8,}")
        lines.append(f"  {'failed (rolled back)':<20} {self.failed:>8,}")
        if self.reconnects:
            lines.append(f"  {'reconnects':<20} {self.reconnects:>8,}")
        return "\n".join(lines)


def run_load(
    dsn: str,
    rate: float,
    seconds: float,
    *,
    seed: int = 7,
    progress: Callable[[str], None] = print,
    stop: Callable[[], bool] | None = None,
    mix: Mix = OPERATIONS,
) -> LoadReport:
    """Run the workload for `seconds` at `rate` transactions per second (or until `stop()` is
    true), then report.

    A connection lost mid-run (Postgres restarting) costs the operation in flight; the workload
    reconnects and carries on. `progress` gets a line about every second; the caller prints
    `summary()`."""
    if rate <= 0 or seconds < 0:
        raise ConfigError(
            f"load: need rate > 0 and seconds >= 0, got rate={rate} seconds={seconds}"
        )
    with friendly_errors(dsn, "running the demo workload"):
        conn = connect(dsn)
        run: _Run | None = None
        try:
            run = _Run(dsn, conn, random.Random(seed), rate, mix)
            return run.run(seconds, progress, stop or (lambda: False))
        finally:
            (run.conn if run else conn).close()  # a reconnect replaced the first one


class _Run:
    def __init__(
        self,
        dsn: str,
        conn: psycopg.Connection[TupleRow],
        rng: random.Random,
        rate: float,
        mix: Mix,
    ) -> None:
        self.dsn, self.conn, self.rng, self.rate, self.mix = dsn, conn, rng, rate, mix
        with conn.cursor() as cur:
            self.pools = Pools.load(cur)
        conn.commit()
        self.reconnects = 0
        self.names = list(mix)
        self.weights = [weight for _, weight in mix.values()]
        self.ops: Counter[str] = Counter()
        self.rows = self.skipped = self.failed = 0
        self.keys = _KeyLog()

    def run(
        self, seconds: float, progress: Callable[[str], None], stop: Callable[[], bool]
    ) -> LoadReport:
        started = time.monotonic()
        next_report = started + 1.0
        try:
            for _ in _schedule(self.rate, seconds, started):
                if stop():
                    break
                try:
                    self._one()
                except psycopg.OperationalError as exc:
                    self.failed += 1
                    self._reconnect(exc, started + seconds, progress, stop)
                now = time.monotonic()
                if now >= next_report:
                    next_report = now + 1.0
                    progress(self._progress_line(now - started))
        except KeyboardInterrupt:  # Ctrl-C ends a long demo run early, still with its report
            progress("load: interrupted (an operation in flight, if any, was rolled back)")
        return LoadReport(
            operations=MappingProxyType(dict(self.ops)),
            transactions=self.ops.total(),
            row_changes=self.rows,
            skipped=self.skipped,
            failed=self.failed,
            seconds=time.monotonic() - started,
            target_rate=self.rate,
            keys=self.keys.freeze(),
            reconnects=self.reconnects,
        )

    def _reconnect(
        self,
        lost: psycopg.OperationalError,
        deadline: float,
        progress: Callable[[str], None],
        stop: Callable[[], bool],
    ) -> None:
        """Replace a lost connection, trying until the run's deadline; the operation in flight
        was rolled back by the server (or never reached it)."""
        progress(f"load: lost the connection to Postgres ({str(lost).strip()}); reconnecting")
        self.conn.close()
        while True:
            try:
                self.conn = psycopg.connect(self.dsn, autocommit=False)
                self.reconnects += 1
                progress("load: reconnected")
                return
            except psycopg.OperationalError:
                if time.monotonic() >= deadline or stop():
                    raise
                time.sleep(RECONNECT_EVERY_S)

    def _progress_line(self, elapsed: float) -> str:
        attempts = self.ops.total() + self.skipped + self.failed
        return (
            f"load: {elapsed:5.1f} s  {attempts:,} operations"
            f"  {attempts / elapsed:.1f}/s (target {self.rate:g})"
            f"  {self.ops.total():,} committed  {self.rows:,} row changes"
        )

    def _one(self) -> None:
        name = self.rng.choices(self.names, self.weights)[0]
        op = self.mix[name][0]
        try:
            with self.conn.transaction(), self.conn.cursor() as cur:
                effect = op(cur, self.rng, self.pools)
        except TRANSIENT:
            self.failed += 1
            return
        if effect is None:
            self.skipped += 1
            return
        self.ops[name] += 1
        self.rows += effect.rows
        self.keys.record(effect)


def _schedule(rate: float, seconds: float, start: float) -> Iterator[None]:
    """Yields when each operation is due; stops at the deadline."""
    deadline = start + seconds
    interval = 1.0 / rate
    i = 0
    while True:
        due = start + i * interval
        now = time.monotonic()
        if due >= deadline or now >= deadline:
            return
        if due > now:
            time.sleep(due - now)
        elif now - due > MAX_BACKLOG_SECONDS:
            start += now - due  # shift the schedule: the stall's slots are lost, not replayed
        yield
        i += 1


class _KeyLog:
    def __init__(self) -> None:
        self.inserted_customers: set[int] = set()
        self.deleted_customers: set[int] = set()
        self.inserted_orders: set[int] = set()
        self.deleted_orders: set[int] = set()
        self.key_changes: list[tuple[int, int]] = []

    def record(self, effect: Effect) -> None:
        if effect.new_customer is not None:
            self.inserted_customers.add(effect.new_customer)
        if effect.new_order is not None:
            self.inserted_orders.add(effect.new_order)
        self.inserted_orders.update(effect.new_orders)
        if effect.moved_customer is not None:
            old, new = effect.moved_customer
            self.key_changes.append((old, new))
            if old in self.inserted_customers:
                self.inserted_customers.remove(old)
                self.inserted_customers.add(new)
        if effect.gone_customer is not None:
            self.inserted_customers.discard(effect.gone_customer)
            self.deleted_customers.add(effect.gone_customer)
        for order in effect.gone_orders:
            self.inserted_orders.discard(order)
            self.deleted_orders.add(order)

    def freeze(self) -> LoadKeys:
        return LoadKeys(
            inserted_customers=frozenset(self.inserted_customers),
            deleted_customers=frozenset(self.deleted_customers),
            inserted_orders=frozenset(self.inserted_orders),
            deleted_orders=frozenset(self.deleted_orders),
            key_changes=tuple(self.key_changes),
        )
