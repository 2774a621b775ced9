"""Small statistics for the benchmark: percentiles, and whether a load step kept lag bounded.

Pure functions on plain numbers, so the rules that decide a published figure are unit-tested.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NotRequired, TypedDict

# A step whose lag ends up this many times its early lag (plus the slack) is falling behind.
TREND_FACTOR = 1.5
TREND_SLACK_S = 1.0
MIN_SETTLED_SAMPLES = 3


class SummaryDict(TypedDict):
    count: int
    p50: float
    p95: float
    p99: float
    max: float


@dataclass(frozen=True)
class Summary:
    """The figures published for a set of durations (seconds)."""

    count: int
    p50: float
    p95: float
    p99: float
    max: float

    def as_dict(self) -> SummaryDict:
        return SummaryDict(count=self.count, p50=self.p50, p95=self.p95, p99=self.p99, max=self.max)


def _require_values(values: Sequence[float], what: str) -> list[float]:
    if not values:
        raise ValueError(f"{what} of no values: measure at least one sample first")
    return sorted(values)


def _interpolated(ordered: list[float], q: float) -> float:
    # numpy's default ("linear"): rank q/100*(n-1) between the two neighbouring order statistics
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    rank = q / 100 * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def percentiles(values: Sequence[float], qs: Sequence[float] = (50, 95, 99)) -> dict[str, float]:
    """`{"p50": …, "p95": …, "p99": …}`, interpolated linearly like numpy's default.

    Keys are `p` + the percentile without trailing zeros (`p99.9` for 99.9).
    """
    ordered = _require_values(values, "percentiles")
    return {f"p{q:g}": _interpolated(ordered, q) for q in qs}


def median(values: Sequence[float]) -> float:
    return _interpolated(_require_values(values, "median"), 50)


def summarize(values: Sequence[float]) -> Summary:
    ordered = _require_values(values, "summary")
    return Summary(
        count=len(ordered),
        p50=_interpolated(ordered, 50),
        p95=_interpolated(ordered, 95),
        p99=_interpolated(ordered, 99),
        max=ordered[-1],
    )


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def lag_is_bounded(
    samples: Sequence[tuple[float, float]], *, settle_s: float, max_lag_s: float
) -> bool:
    """Whether the pipeline kept up during one load step.

    `samples` are (seconds since the step started, lag in seconds). Samples before `settle_s` are
    ignored: the pipeline is still catching up with the previous step. The step is bounded when,
    over the remaining ("settled") samples,

    1. lag never exceeds `max_lag_s`, and
    2. lag is not trending upward: the mean lag of the last third of the settled samples is at
       most `TREND_FACTOR` (1.5) times the mean of the first third plus `TREND_SLACK_S` (1 s).
       The slack keeps sub-second jitter around a small lag from reading as a trend.

    Fewer than `MIN_SETTLED_SAMPLES` (3) settled samples cannot show a trend, so they are judged
    not bounded: a published throughput must never rest on too little evidence.
    """
    settled = [lag for t, lag in sorted(samples) if t >= settle_s]
    if len(settled) < MIN_SETTLED_SAMPLES or max(settled) > max_lag_s:
        return False
    third = len(settled) // 3
    first, last = _mean(settled[:third]), _mean(settled[-third:])
    return last <= TREND_FACTOR * first + TREND_SLACK_S


class StepDict(TypedDict):
    target_rate: float
    achieved_rate: float
    bounded: bool
    lag_samples: list[list[float]]
    achieved_transactions: float | None
    freshness_p50: NotRequired[float | None]  # of the changes committed during the step
    freshness_p99: NotRequired[float | None]


@dataclass(frozen=True)
class StepResult:
    """One step of the sustained load: the rate asked for, the rate reached, and its lag."""

    target_rate: float
    achieved_rate: float
    bounded: bool
    lag_samples: tuple[tuple[float, float], ...] = ()
    # transactions/s the load generator reached: below the target, it (not the pipeline) was
    # the limit, since it shares the machine
    achieved_transactions: float | None = None
    freshness_p50: float | None = None  # of the changes committed during the step (s)
    freshness_p99: float | None = None

    def as_dict(self) -> StepDict:
        return StepDict(
            target_rate=self.target_rate,
            achieved_rate=self.achieved_rate,
            bounded=self.bounded,
            lag_samples=[[t, lag] for t, lag in self.lag_samples],
            achieved_transactions=self.achieved_transactions,
            freshness_p50=self.freshness_p50,
            freshness_p99=self.freshness_p99,
        )


def highest_bounded(steps: Sequence[StepResult]) -> StepResult | None:
    """The fastest step that kept lag bounded, with every slower step bounded too.

    Steps are taken in order of target rate and the first unbounded step ends the search: a rate
    the pipeline could not sustain caps the claim, whatever a faster step happened to show.
    """
    best = None
    for step in sorted(steps, key=lambda s: s.target_rate):
        if not step.bounded:
            break
        best = step
    return best


def per_1000(cpu_s: float, changes: int) -> float | None:
    """CPU seconds per 1,000 changes (None: no change, or no CPU seen)."""
    return cpu_s / changes * 1000 if changes and cpu_s else None
