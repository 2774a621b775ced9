"""The benchmark's statistics: percentiles, and when a load step counts as sustained."""

from __future__ import annotations

import random

import numpy as np
import pytest

from changelake.bench.stats import (
    StepResult,
    Summary,
    highest_bounded,
    lag_is_bounded,
    median,
    percentiles,
    summarize,
)


def test_percentiles_interpolate_linearly_between_order_statistics() -> None:
    # ranks 0.5·4 = 2, 0.95·4 = 3.8 and 0.99·4 = 3.96 of the sorted values 15 20 35 40 50
    assert percentiles([40, 15, 50, 35, 20]) == {
        "p50": 35,
        "p95": pytest.approx(48.0),
        "p99": pytest.approx(49.6),
    }
    assert percentiles([7.0]) == {"p50": 7.0, "p95": 7.0, "p99": 7.0}
    assert percentiles([1, 2], qs=(0, 25, 99.9, 100)) == {
        "p0": 1,
        "p25": 1.25,
        "p99.9": pytest.approx(1.999),
        "p100": 2,
    }


def test_percentiles_agree_with_numpy() -> None:
    values = [random.Random(7).expovariate(1.0) for _ in range(101)]
    ours = percentiles(values, qs=(1, 50, 90, 95, 99))
    for q in (1, 50, 90, 95, 99):
        assert ours[f"p{q}"] == pytest.approx(float(np.percentile(values, q)))


def test_median_and_summary() -> None:
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 3, 2]) == 2.5
    summary = summarize([float(v) for v in range(1, 11)])
    assert summary == Summary(count=10, p50=5.5, p95=pytest.approx(9.55), p99=9.91, max=10.0)


def test_no_values_or_a_bad_percentile_are_refused_clearly() -> None:
    with pytest.raises(ValueError, match="percentiles of no values"):
        percentiles([])
    with pytest.raises(ValueError, match="median of no values"):
        median([])
    with pytest.raises(ValueError, match="summary of no values"):
        summarize([])
    with pytest.raises(ValueError, match=r"percentile 101 is outside 0\.\.100"):
        percentiles([1.0], qs=(101,))


def samples(lags: list[float], start: float = 0.0, every: float = 1.0) -> list[tuple[float, float]]:
    return [(start + i * every, lag) for i, lag in enumerate(lags)]


def test_a_flat_jittery_lag_is_bounded() -> None:
    lags = [1.0, 1.4, 0.8, 1.2, 1.1, 0.9, 1.3, 1.0, 1.2]
    assert lag_is_bounded(samples(lags), settle_s=0, max_lag_s=5)


def test_the_settling_time_is_ignored() -> None:
    lags = [30.0, 20.0, 10.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert lag_is_bounded(samples(lags), settle_s=3, max_lag_s=5)
    assert not lag_is_bounded(samples(lags), settle_s=2, max_lag_s=5)  # 10 s lag left in


def test_a_lag_over_the_ceiling_is_unbounded() -> None:
    lags = [1.0, 1.0, 1.0, 6.0, 1.0, 1.0]
    assert not lag_is_bounded(samples(lags), settle_s=0, max_lag_s=5)
    assert lag_is_bounded(samples(lags), settle_s=0, max_lag_s=6)  # the ceiling itself is fine


def test_a_lag_that_keeps_growing_is_unbounded_even_under_the_ceiling() -> None:
    growing = [0.5 * i for i in range(1, 13)]  # 0.5 s … 6 s
    assert not lag_is_bounded(samples(growing), settle_s=0, max_lag_s=10)


def test_small_lags_get_an_absolute_slack() -> None:
    # tripling from 0.2 s to 0.6 s is within 1.5 times + 1 s: jitter, not falling behind
    lags = [0.2, 0.2, 0.3, 0.4, 0.5, 0.6]
    assert lag_is_bounded(samples(lags), settle_s=0, max_lag_s=5)


def test_too_few_settled_samples_are_not_enough_evidence() -> None:
    assert not lag_is_bounded(samples([1.0, 1.0]), settle_s=0, max_lag_s=5)
    assert not lag_is_bounded(samples([1.0] * 5), settle_s=3, max_lag_s=5)  # 2 left
    assert not lag_is_bounded([], settle_s=0, max_lag_s=5)


def test_samples_are_ordered_by_time_before_judging() -> None:
    growing = samples([0.5 * i for i in range(1, 13)])
    assert not lag_is_bounded(list(reversed(growing)), settle_s=0, max_lag_s=10)


def step(rate: float, bounded: bool) -> StepResult:
    return StepResult(target_rate=rate, achieved_rate=rate * 0.98, bounded=bounded)


def test_highest_bounded_stops_at_the_first_unbounded_step() -> None:
    steps = [step(800, True), step(100, True), step(400, False), step(200, True)]
    assert highest_bounded(steps) == step(200, True)
    assert highest_bounded([step(100, True), step(200, True)]) == step(200, True)
    assert highest_bounded([step(100, False), step(200, True)]) is None
    assert highest_bounded([]) is None
