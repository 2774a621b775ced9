"""A load step is judged again by the freshness of the changes committed during it."""

from __future__ import annotations

from pipelines.bench.stats import StepResult
from pipelines.bench.sustained import Step, judged_by_freshness

STARTED_MS = 1_000_000


def step(bounded: bool = True) -> Step:
    return Step(StepResult(400, 379, bounded, achieved_transactions=186), STARTED_MS, [])


def test_a_change_that_waited_past_the_cap_unbounds_the_step() -> None:
    seen = [(STARTED_MS + 5_000, 30.0), (STARTED_MS + 58_000, 165.0)]
    judged = judged_by_freshness(step(), seen, step_s=60, max_lag_s=120)
    assert not judged.bounded
    assert (judged.freshness_p50, judged.freshness_p99) == (97.5, 163.65)
    assert (judged.target_rate, judged.achieved_rate, judged.achieved_transactions) == (
        400,
        379,
        186,
    )


def test_changes_outside_the_step_do_not_count() -> None:
    seen = [(STARTED_MS - 1, 500.0), (STARTED_MS + 60_001, 500.0), (STARTED_MS + 30_000, 119.0)]
    assert judged_by_freshness(step(), seen, step_s=60, max_lag_s=120).bounded


def test_an_unbounded_step_stays_unbounded() -> None:
    assert not judged_by_freshness(step(bounded=False), [], step_s=60, max_lag_s=120).bounded
