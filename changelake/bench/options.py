"""What `changelake bench` runs: the source's size, the load's steps and how they are judged
(the command's flags; a flag not given keeps the default declared here)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BenchOptions:
    # Customers; products, orders and lines scale with them (~8.1 rows per customer). 250k
    # (~2M rows) fits `make bench` in 30 minutes on two cores, setup included; the 1M
    # (8.1M rows) takes over an hour there: see the README's benchmark section.
    rows: int = 250_000
    # Transactions/s of the first sustained step (~2 row changes each); each step doubles it, up
    # to 4,000 (~8,000 row changes/s), or until a step's lag is not bounded.
    rate: float = 250.0
    steps: int = 5
    step_s: float = 60.0
    settle_s: float = 15.0
    # "Bounded" means lag stops growing (stats.lag_is_bounded's trend test); this cap only
    # throws out a step whose lag is steady but useless. Two cores take 20-35 s per batch of
    # four concurrent MERGEs, so a 30 s cap failed steady steps (measured 2026-11-22).
    max_lag_s: float = 120.0
    prefill_s: float = 30.0  # the load written while the pipeline and Debezium are held back
    prefill_rate: float = 500.0

    @property
    def rates(self) -> list[float]:
        return [self.rate * 2**i for i in range(self.steps)]
