"""The step-up: doubling until lag is not bounded, then one step in between on a drained
pipeline; and a load step judged again by the freshness of the changes committed during it."""

from __future__ import annotations

import pytest

from changelake.bench import sustained
from changelake.bench.pgbench_load import PgbenchRun
from changelake.bench.stats import StepResult
from changelake.bench.sustained import Step, judged_by_freshness, run_steps

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


class Machine:
    """A pipeline that keeps up with up to `keeps_up` transactions/s: steady lags at or below
    it, growing lags above."""

    def __init__(self, keeps_up: float, drains: bool = True):
        self.keeps_up, self.drains = keeps_up, drains
        self.rate = 0.0
        self.asked: list[tuple[float, int]] = []  # (rate, seed) of each load
        self.drain_checks = 0

    def load(self, rate: float, seconds: float, seed: int) -> PgbenchRun:
        self.rate = rate
        self.asked.append((rate, seed))
        return PgbenchRun(int(rate * seconds), int(2 * rate * seconds), 0, 0, seconds, rate)

    def lags(self, since_ms: int, _until_ms: int) -> list[tuple[int, float]]:
        grow = self.rate > self.keeps_up
        return [(since_ms + s * 1000, 3.0 * s if grow else 2.0) for s in (10, 20, 30, 40, 50)]

    def caught_up(self) -> bool:
        self.drain_checks += 1
        return self.drains


def steps_of(machine: Machine, rates: list[float], caught_up: bool = True) -> list[StepResult]:
    done = run_steps(
        machine.load,
        machine.lags,
        rates,
        step_s=60,
        settle_s=0,
        max_lag_s=120,
        say=lambda _: None,
        caught_up=machine.caught_up if caught_up else None,
    )
    return [s.result for s in done]


def test_a_step_in_between_follows_the_first_unbounded_one() -> None:
    machine = Machine(keeps_up=3000)
    results = steps_of(machine, [250, 500, 1000, 2000, 4000])
    assert [(r.target_rate, r.bounded) for r in results] == [
        (250, True),
        (500, True),
        (1000, True),
        (2000, True),
        (4000, False),
        (3000, True),
    ]
    assert [seed for _, seed in machine.asked] == [101, 102, 103, 104, 105, 106]  # all different
    assert machine.drain_checks == 1
    assert results[-1].achieved_rate == 6000  # row changes/s, as reported


def test_no_step_in_between_when_the_backlog_does_not_drain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sustained, "DRAIN_S", 0.0)
    machine = Machine(keeps_up=3000, drains=False)
    results = steps_of(machine, [1000, 2000, 4000])
    assert [r.target_rate for r in results] == [1000, 2000, 4000]
    assert machine.drain_checks >= 1


@pytest.mark.parametrize(
    ("keeps_up", "ran"),
    [
        (10_000, [250, 500, 1000]),  # every step bounded: nothing to refine
        (100, [250]),  # the first step unbounded: nothing bounded to refine from
    ],
)
def test_no_step_in_between_without_a_bounded_step_then_an_unbounded_one(
    keeps_up: float, ran: list[float]
) -> None:
    machine = Machine(keeps_up)
    assert [r.target_rate for r in steps_of(machine, [250, 500, 1000])] == ran
    assert machine.drain_checks == 0


def test_no_step_in_between_without_a_way_to_tell_the_pipeline_drained() -> None:
    machine = Machine(keeps_up=300)
    results = steps_of(machine, [250, 500, 1000], caught_up=False)
    assert [r.target_rate for r in results] == [250, 500]
