"""The sustained load, stepped up until the pipeline's lag stops being bounded, against a
streaming `changelake run`; and the search index's applied LSN watched the whole time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from pipelines.bench.pgbench_load import PgbenchRun
from pipelines.bench.stats import StepResult, lag_is_bounded, percentiles
from pipelines.bench.visibility import Visible, commit_lags
from pipelines.exceptions import ChangelakeError
from pipelines.search.client import SearchClient

Say = Callable[[str], None]
PLOT_POINTS = 1500
Load = Callable[[float, float, int], PgbenchRun]  # (transactions/s, seconds, seed) → what it did


@dataclass
class Step:
    result: StepResult
    started_ms: int
    lags: list[tuple[int, float]]  # (commit time ms, lag s) of every commit in the step


Lags = Callable[[int, int], list[tuple[int, float]]]  # (from ms, to ms) → (commit ms, lag s)


def changelog_lags(tables: Sequence[Path]) -> Lags:
    """changelake's lag at each changelog commit of `tables` between two moments."""

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
) -> list[Step]:
    """Each rate for `step_s`; stops after the first step whose lag was not bounded."""
    steps: list[Step] = []
    for number, rate in enumerate(rates, 1):
        started_ms = int(time.time() * 1000)
        say(f"bench: step {number}/{len(rates)}: {rate:g} transactions/s for {step_s:.0f} s")
        load = load_at(rate, step_s, 100 + number)
        time.sleep(min(10.0, settle_s))  # commits of the step's last batches land after it
        lags = lags_between(started_ms, started_ms + int((step_s + 10) * 1000))
        samples = sorted(((at - started_ms) / 1000, lag) for at, lag in lags)
        bounded = lag_is_bounded(samples, settle_s=settle_s, max_lag_s=max_lag_s)
        achieved = load.row_changes / load.seconds if load.seconds else 0.0
        transactions = load.transactions / load.seconds if load.seconds else 0.0
        result = StepResult(rate, achieved, bounded, tuple(samples), transactions)
        worst = max((lag for _, lag in samples), default=float("nan"))
        say(
            f"  {transactions:,.0f} transactions/s, {achieved:,.0f} row changes/s achieved;"
            f" {len(samples)} commits, worst lag {worst:.1f} s:"
            f" {'bounded' if bounded else 'NOT bounded'}"
        )
        steps.append(Step(result, started_ms, lags))
        if not bounded:
            break
    return steps


def judged_by_freshness(
    step: Step, seen: Sequence[tuple[int, float]], step_s: float, max_lag_s: float
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
