"""What continuous verification costs the pipeline: the same load against a streaming `run` with
verification at its default share and with it off (`--verify-share 0`), three times each in the
order on, off, off, on, on, off (a machine that slows down or speeds up over the phase favours
neither), each measured by the tables' freshness and the run's CPU seconds. The figure the
issue holds it to: freshness with it on no more than 10% worse. Freshness is the median over
every table commit of the runs of one kind, after each run's first WARMUP_S of load: a run's
own median rests on a few dozen commits whose lags follow where its batches (and, then,
compaction rounds) fall in the window, so runs of one kind differed by a third (12.0-16.1 s with
verification off; 14.4 and 16.0 s in two runs with it on whose verifier took no step at all),
and the median of three such medians swung by as much as the limit.

Then the time a full pass over the bench's tables takes: a run with no load at share 1 (no rest
between steps) until every table has logged a complete pass. Tables take turns, so the longest
pass spans every table's steps: at a share s, a pass over every table takes about that long / s."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any, TypedDict

from changelake.apply.run_options import RunOptions
from changelake.bench.resources import Timed, timed
from changelake.bench.sustained import Lags
from changelake.chaos.pipeline_process import PipelineProcess
from changelake.verify.verified import PASSED, WORKED

SHARE = RunOptions().verify_share  # the default a user gets
SECONDS = 90.0  # of load measured per run: a few dozen table commits
# A fresh run's first batches (its JVM and Python workers cold) lag ~22 s in every run, on or off:
# load before the measured window, not what verification costs.
WARMUP_S = 30.0
ORDER = (True, False, False, True, True, False)  # verification on or off, run by run
PASS_DEADLINE_S = 1800.0  # for one pass over every table, idle, at share 1


class VerifyCost(TypedDict):
    share: float
    rate: float  # transactions/s of the load
    seconds: float  # of load measured, per run
    warmup_s: float  # of load before it (older results: absent, none)
    on_p50_s: float | None  # freshness, median over the table commits of the runs with it on
    off_p50_s: float | None
    run_p50_s: list[float | None]  # each run's own median, in `order` (older results: absent)
    commits: list[int]  # the commits measured with it on, and off (older results: absent)
    ratio: float | None  # on / off
    on_cpu_s: float  # the run's CPU seconds over the load, per run (median)
    off_cpu_s: float
    work_s: float  # verification's own steps, over the runs with it on
    order: list[bool]  # the runs, on or off (older results: absent, on/off/off/on)
    passes: list[Pass]  # one full pass per table, idle, at share 1 (older results: absent)
    pass_cpu_s: float  # the run's CPU seconds over those passes


class Pass(TypedDict):
    table: str
    rows: int
    seconds: float  # from its first step to its last
    work_s: float  # its steps' own time


@dataclass
class CostRun:
    env: Mapping[str, str]
    log_dir: Path
    load: Callable[[float, float], Any]  # (transactions/s, seconds): blocks while it loads
    lags: Lags
    streaming: Callable[[], bool]
    caught_up: Callable[[], bool]
    tables: int  # the bench's tables: the pass phase waits for a pass over each
    wait: Callable[[Callable[[], bool], str, float], None]
    say: Callable[[str], None]


def measure(run: CostRun, rate: float, seconds: float = SECONDS) -> VerifyCost:
    freshness: dict[bool, list[float]] = {True: [], False: []}  # every commit's lag
    cpu: dict[bool, list[float]] = {True: [], False: []}
    per_run: list[float | None] = []
    work = 0.0
    for number, on in enumerate(ORDER):
        share = SHARE if on else 0.0
        log = run.log_dir / f"verify-cost-{number + 1}.log"
        lags, used = _one(run, share, log, rate, seconds)
        freshness[on].extend(lags)
        per_run.append(_median_of(lags))
        cpu[on].append(used.cpu_s)
        work += worked_s(log) if on else 0.0
        shown = f"{per_run[-1]:.1f} s" if per_run[-1] is not None else "no commits"
        run.say(
            f"  verification {'on' if on else 'off'} (share {share:g}): freshness p50 "
            f"{shown}, the run's CPU {used.cpu_s:.0f} s over {used.seconds:.0f} s"
        )
    passes, pass_cpu_s = full_pass(run, log=run.log_dir / "verify-pass.log")
    on_p50, off_p50 = _median_of(freshness[True]), _median_of(freshness[False])
    return VerifyCost(
        share=SHARE,
        rate=rate,
        seconds=seconds,
        warmup_s=WARMUP_S,
        on_p50_s=on_p50,
        off_p50_s=off_p50,
        run_p50_s=per_run,
        commits=[len(freshness[True]), len(freshness[False])],
        ratio=on_p50 / off_p50 if on_p50 is not None and off_p50 else None,
        on_cpu_s=median(cpu[True]),
        off_cpu_s=median(cpu[False]),
        work_s=work,
        order=list(ORDER),
        passes=passes,
        pass_cpu_s=pass_cpu_s,
    )


def _median_of(lags: list[float]) -> float | None:
    return median(lags) if lags else None  # a run with no commit in its window has no median


def _one(
    run: CostRun, share: float, log: Path, rate: float, seconds: float
) -> tuple[list[float], Timed]:
    """One streaming run at `share` under the load: the tables' lag at each commit after its
    first WARMUP_S, and the run's wall and CPU seconds over all of it."""
    pipeline = PipelineProcess(
        run.env, log, ("--trigger-seconds", "1", "--verify-share", str(share))
    )
    pipeline.start()
    try:
        run.wait(lambda: pipeline.alive() and run.streaming(), "the pipeline to stream", 600)
        run.wait(run.caught_up, "the pipeline to catch up", 300)
        since_ms = time.time_ns() // 10**6 + int(WARMUP_S * 1000)
        with timed(pipeline.pid) as used:
            run.load(rate, WARMUP_S + seconds)
        return [lag for _, lag in run.lags(since_ms, time.time_ns() // 10**6)], used
    finally:
        pipeline.stop()


def full_pass(run: CostRun, log: Path) -> tuple[list[Pass], float]:
    """A run with no load at share 1 until each of the bench's tables has logged a complete
    pass: each pass, and the run's CPU seconds over them."""
    pipeline = PipelineProcess(run.env, log, ("--trigger-seconds", "1", "--verify-share", "1"))
    pipeline.start()
    try:
        run.wait(lambda: pipeline.alive() and run.streaming(), "the pipeline to stream", 600)
        with timed(pipeline.pid) as used:
            run.wait(
                lambda: len(passes_in(log)) >= run.tables,
                "a verification pass over every table",
                PASS_DEADLINE_S,
            )
    finally:
        pipeline.stop()
    passes = passes_in(log)
    for p in passes:
        run.say(
            f"  verification pass over {p['table']}: {p['rows']:,} rows in {p['seconds']:.0f} s "
            f"({p['work_s']:.1f} s of work)"
        )
    return passes, used.cpu_s


def passes_in(log: Path) -> list[Pass]:
    """The first complete pass of each table the log records."""
    found: dict[str, Pass] = {}
    for m in _matches(log, PASSED):
        found.setdefault(
            m["table"],
            Pass(
                table=m["table"],
                rows=int(m["rows"].replace(",", "")),
                seconds=float(m["seconds"]),
                work_s=float(m["work"]),
            ),
        )
    return list(found.values())


def worked_s(log: Path) -> float:
    """Verification's work seconds, from the line a stopping run logs (0: none)."""
    return sum(float(m["work"]) for m in _matches(log, WORKED))


def _matches(log: Path, pattern: re.Pattern[str]) -> list[re.Match[str]]:
    """`pattern` searched in each line of a run's log (none: no log)."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return [m for m in map(pattern.search, text.splitlines()) if m]


def cost_section(cost: VerifyCost | None) -> list[str]:
    """The report's paragraph on it (older results: nothing)."""
    if not cost:
        return []
    if cost["ratio"] is None:
        return ["## What continuous verification costs", "No table commits were measured."]
    worse = (cost["ratio"] - 1) * 100
    warmup = cost.get("warmup_s", 0.0)
    return [
        "## What continuous verification costs",
        f"The same load ({cost['rate']:g} transactions/s for {warmup + cost['seconds']:.0f} s) "
        f"against a streaming run with continuous verification at its default share "
        f"({cost['share']:g}) and without it, {_order(cost)}: "
        f"freshness p50 {cost['on_p50_s']:.1f} s with it, {cost['off_p50_s']:.1f} s without "
        f"({worse:+.0f}%; the limit is +10%){_measured(cost)}, the run's CPU "
        f"{cost['on_cpu_s']:.0f} s against {cost['off_cpu_s']:.0f} s per run; its own steps "
        f"worked {cost['work_s']:.0f} s in all.",
        *_pass_sentence(cost),
    ]


def _measured(cost: VerifyCost) -> str:
    """Over what the freshness figures are medians (older results: each run's median, then the
    median of those)."""
    runs, commits = cost.get("run_p50_s"), cost.get("commits")
    if not runs or not commits:
        return ""
    order = cost.get("order") or []

    def each(on: bool) -> str:
        return " / ".join(
            f"{p:.1f}" if p is not None else "-"
            for p, o in zip(runs, order, strict=True)
            if o == on
        )

    return (
        f" over every table commit after each run's first {cost['warmup_s']:.0f} s of load "
        f"({commits[0]} and {commits[1]} commits; each run's own median: with it {each(True)} s, "
        f"without {each(False)} s)"
    )


def _order(cost: VerifyCost) -> str:
    order = cost.get("order") or [True, False, False, True]  # older results ran these
    each = sum(order)  # as many on as off
    kinds = ", ".join("on" if on else "off" for on in order)
    return f"{'twice' if each == 2 else f'{each} times'} each ({kinds})"


def _pass_sentence(cost: VerifyCost) -> list[str]:
    passes = cost.get("passes") or []
    if not passes:
        return []
    rows = sum(p["rows"] for p in passes)
    work = sum(p["work_s"] for p in passes)
    longest = max(p["seconds"] for p in passes)
    return [  # the longest pass spans every table's turns (the module's docstring)
        f"A full pass over each of the bench's {len(passes)} tables ({rows:,} rows), the "
        f"pipeline idle and verification at share 1 (no rest between steps): the longest "
        f"{longest:.0f} s, the first passes' steps working {work:.0f} s, the run's CPU "
        f"{cost['pass_cpu_s']:.0f} s over it. At the default share ({cost['share']:g}) a pass "
        f"over every table takes about {longest / cost['share'] / 60:.0f} minutes on an idle "
        f"machine, longer under load.",
    ]
