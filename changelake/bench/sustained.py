"""The sustained load, stepped up until the pipeline's lag stops being bounded, against a
streaming `changelake run`; and the search index's applied LSN watched the whole time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from changelake.bench.pgbench_load import PgbenchRun
from changelake.bench.stats import StepResult, lag_is_bounded, percentiles
from changelake.bench.visibility import Visible, commit_lags
from changelake.exceptions import ChangelakeError
from changelake.search.client import SearchClient
from changelake.waiting import wait_until

Say = Callable[[str], None]
PLOT_POINTS = 1500
# A step in between runs on a drained pipeline, not on the backlog of the step it failed.
DRAIN_S = 240.0
Load = Callable[[float, float, int], PgbenchRun]  # (transactions/s, seconds, seed) → what it did


@dataclass
class Step:
    result: StepResult
    started_ms: int
    lags: list[tuple[int, float]]  # (commit time ms, lag s) of every commit in the step


Lags = Callable[[int, int], list[tuple[int, float]]]  # (from ms, to ms) → (commit ms, lag s)


def table_lags(tables: Sequence[Path]) -> Lags:
    """changelake's lag at each commit of `tables` between two moments."""

    def lags(since_ms: int, until_ms: int) -> list[tuple[int, float]]:
        return [
            (at, lag) for t in tables for at, lag in commit_lags(t) if since_ms <= at <= until_ms
        ]

    return lags


def run_steps(
    load_at: Load,
    lags_between: Lags,
    rates: Sequence[float],
    step_s: float,
    settle_s: float,
    max_lag_s: float,
    say: Say,
    caught_up: Callable[[], bool] | None = None,
) -> list[Step]:
    """Each rate for `step_s`; stops after the first step whose lag was not bounded. Then, if
    the step before it was bounded and the pipeline catches up (`caught_up`) within DRAIN_S,
    one more step halfway between the two: doubling leaves the highest sustained rate known
    only to a factor of two."""
    steps: list[Step] = []
    for number, rate in enumerate(rates, 1):
        label = f"{number}/{len(rates)}"
        steps.append(
            _step(
                load_at, 100 + number, lags_between, rate, step_s, settle_s, max_lag_s, say, label
            )
        )
        if not steps[-1].result.bounded:
            break
    else:
        return steps
    between = refining_rate([s.result for s in steps])
    if between is None or caught_up is None:
        return steps
    say(f"bench: waiting for step {len(steps)}'s backlog to drain before a step in between")
    if not wait_until(caught_up, DRAIN_S, interval_s=1.0):
        say(f"  not drained after {DRAIN_S:.0f} s: no step in between")
        return steps
    steps.append(
        _step(
            load_at,
            100 + len(rates) + 1,
            lags_between,
            between,
            step_s,
            settle_s,
            max_lag_s,
            say,
            "in between",
        )
    )
    return steps


def refining_rate(results: Sequence[StepResult]) -> float | None:
    """Halfway between the last two steps' rates when the last was not bounded and the one
    before it was (None otherwise: nothing bounded to refine from, or nothing unbounded)."""
    if len(results) < 2 or results[-1].bounded or not results[-2].bounded:
        return None
    return (results[-2].target_rate + results[-1].target_rate) / 2


def _step(
    load_at: Load,
    seed: int,
    lags_between: Lags,
    rate: float,
    step_s: float,
    settle_s: float,
    max_lag_s: float,
    say: Say,
    label: str,
) -> Step:
    started_ms = int(time.time() * 1000)
    say(f"bench: step {label}: {rate:g} transactions/s for {step_s:.0f} s")
    load = load_at(rate, step_s, seed)
    time.sleep(min(10.0, settle_s))  # commits of the step's last batches land after it
    lags = lags_between(started_ms, started_ms + int((step_s + 10) * 1000))
    samples = sorted(((at - started_ms) / 1000, lag) for at, lag in lags)
    bounded = lag_is_bounded(samples, settle_s=settle_s, max_lag_s=max_lag_s)
    achieved = load.row_changes / load.seconds if load.seconds else 0.0
    transactions = load.transactions / load.seconds if load.seconds else 0.0
    worst = max((lag for _, lag in samples), default=float("nan"))
    say(
        f"  {transactions:,.0f} transactions/s, {achieved:,.0f} row changes/s achieved;"
        f" {len(samples)} commits, worst lag {worst:.1f} s:"
        f" {'bounded' if bounded else 'NOT bounded'}"
    )
    return Step(StepResult(rate, achieved, bounded, tuple(samples), transactions), started_ms, lags)


def judged_by_freshness(
    step: Step,
    seen: Sequence[tuple[int, float]],
    step_s: float,
    max_lag_s: float,
) -> StepResult:
    """The step's result with the freshness of the changes committed during it, marked not
    bounded when one of them waited longer than `max_lag_s` to reach Delta. Its commits alone
    cannot show a stall that lands just after the step: the changes it leaves behind can.
    `seen` is (commit ms, freshness s) per change."""
    end_ms = step.started_ms + step_s * 1000
    during = [f for at, f in seen if step.started_ms <= at <= end_ms]
    figures = percentiles(during, (50, 99)) if during else {}
    return replace(
        step.result,
        bounded=step.result.bounded and max(during, default=0.0) <= max_lag_s,
        freshness_p50=figures.get("p50"),
        freshness_p99=figures.get("p99"),
    )


def timeline(steps: list[Step], seen: list[tuple[int, float]]) -> list[dict[str, float]]:
    """The plot's points, in seconds since the sustained load began: each step's start (so a
    step is shaded from when its load began), the lag at each commit, and at most PLOT_POINTS
    changes' freshness, evenly thinned."""
    if not steps:
        return []
    origin = steps[0].started_ms
    points = [{"t": (s.started_ms - origin) / 1000, "rate": s.result.target_rate} for s in steps]
    points += [
        {"t": (at - origin) / 1000, "lag_s": lag, "rate": step.result.target_rate}
        for step in steps
        for at, lag in step.lags
    ]
    thin = max(1, len(seen) // PLOT_POINTS)
    points += [
        {"t": (at - origin) / 1000, "delta_freshness_s": f} for at, f in sorted(seen)[::thin]
    ]
    return sorted(points, key=lambda p: p["t"])


@dataclass
class IndexWatch:
    """Polls each alias's applied LSN in `changelake-state`; every advance is a moment from which
    the changes up to that LSN are searchable (within the index's 1 s refresh)."""

    client: SearchClient
    aliases: Sequence[str]
    every_s: float = 0.5
    moments: dict[str, list[Visible]] = field(default_factory=dict)
    stopping: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        threading.Thread(target=self._poll, daemon=True).start()

    def stop(self) -> dict[str, list[Visible]]:
        self.stopping.set()
        return self.moments

    def _poll(self) -> None:
        while not self.stopping.wait(self.every_s):
            for alias in self.aliases:
                try:
                    found = self.client.request(
                        "GET", f"/changelake-state/_doc/{alias}", missing_ok=True
                    )
                except ChangelakeError:  # a missed poll: a later moment covers it
                    continue
                self._note(alias, (found or {}).get("_source") or {})

    def _note(self, alias: str, state: dict[str, object]) -> None:
        lsn, updated = state.get("applied_lsn"), state.get("updated_at")
        if lsn is None or updated is None:
            return
        seen = self.moments.setdefault(alias, [])
        if not seen or int(str(lsn)) > seen[-1].max_lsn:
            at = datetime.fromisoformat(str(updated)).timestamp()
            seen.append(Visible(int(at * 1000), int(str(lsn))))
