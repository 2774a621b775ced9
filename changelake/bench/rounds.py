"""Where a streaming run's time went, read back from its own log: each table batch's line says
how long its phases took (`[records 1.2, decode 0.8, …]`, timed from the round's start), and
each continuous verification pass how long it took and
how much of that it worked. Pure parsing, so the published figures are unit-tested.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from typing import TypedDict

from changelake.bench.stats import median
from changelake.run_log import PREFIX
from changelake.verify.verified import WORKED

_BATCH = re.compile(
    rf"^{PREFIX}(?P<table>[\w.]+): batch (?P<batch>\d+): (?P<changes>[\d,]+) changes from .*"
    r" in (?P<seconds>[\d.]+)s \(.*?(?:, (?P<jobs>\d+) Spark jobs)? \[(?P<phases>[^\]]*)\]\s*$"
)
_VERIFIED = re.compile(
    rf"^{PREFIX}(?P<table>[\w.]+): verified (?P<rows>[\d,]+) rows against the source in a pass"
    r" of (?P<seconds>[\d.]+)s \((?P<work>[\d.]+)s of work\)"
)
_WORKED = re.compile(rf"^{PREFIX}{WORKED.pattern}")
_RESENT = re.compile(rf"^{PREFIX}[\w.]+: verification found (?P<rows>[\d,]+) rows the lake")


class RoundFigures(TypedDict):
    rounds: int  # micro-batches of the connector's query that had changes
    round_s_p50: float  # from a round's start to its slowest table's commit
    table_batches: int
    changes_p50: float  # per table batch
    jobs_p50: float | None  # Spark jobs per table batch (lines before they were counted: None)
    phases_p50: dict[str, float]  # per phase, over the table batches it took any time in
    phase_batches: dict[str, int]  # how many those were
    verify_passes: int  # continuous verification's complete passes over a table
    verify_pass_s_max: float | None  # the longest, from its first step to its last
    verify_work_s: float  # its steps' seconds in all, passes complete or not
    verify_rows: int  # rows it compared in all
    verify_resent: int  # rows it asked to be re-sent


def round_figures(lines: Iterable[str]) -> RoundFigures | None:
    """The figures of every batch and verification line in `lines`; None without a batch
    line."""
    rounds: dict[tuple[int, int], float] = defaultdict(float)
    restarts = last = 0  # a restarted query numbers its batches from 0 again
    changes: list[float] = []
    jobs: list[float] = []
    phases: dict[str, list[float]] = defaultdict(list)
    passes: list[tuple[float, float]] = []  # (pass seconds, work seconds)
    resent = 0
    worked: list[tuple[int, float]] = []  # (rows, work seconds) of each run that stopped
    for line in lines:
        if batch := _BATCH.match(line):
            number, seconds = int(batch["batch"]), float(batch["seconds"])
            restarts, last = restarts + (number < last), number
            rounds[restarts, number] = max(rounds[restarts, number], seconds)
            changes.append(float(batch["changes"].replace(",", "")))
            if batch["jobs"]:
                jobs.append(float(batch["jobs"]))
            for part in filter(None, (p.strip() for p in batch["phases"].split(","))):
                name, _, value = part.rpartition(" ")
                if float(value) > 0:  # a phase with nothing to do (no index) shows 0.0
                    phases[name].append(float(value))
        elif verified := _VERIFIED.match(line):
            passes.append((float(verified["seconds"]), float(verified["work"])))
        elif work := _WORKED.match(line):
            worked.append((int(work["rows"].replace(",", "")), float(work["work"])))
        elif found := _RESENT.match(line):
            resent += int(found["rows"].replace(",", ""))
    if not changes:
        return None
    return RoundFigures(
        rounds=len(rounds),
        round_s_p50=median(list(rounds.values())),
        table_batches=len(changes),
        changes_p50=median(changes),
        jobs_p50=median(jobs) if jobs else None,
        phases_p50={name: median(values) for name, values in phases.items()},
        phase_batches={name: len(values) for name, values in phases.items()},
        verify_passes=len(passes),
        verify_pass_s_max=max((p for p, _ in passes), default=None),
        # A run that stopped says what it did in all, its passes included; a run that did not
        # (killed, or before the line existed) only its passes: the larger is the nearer.
        verify_work_s=max(sum(w for _, w in worked), sum(w for _, w in passes)),
        verify_rows=sum(r for r, _ in worked),
        verify_resent=resent,
    )


def rounds_section(figures: RoundFigures | None) -> list[str]:
    """The report's markdown about the rounds, or nothing for a run without them."""
    if not figures:
        return []
    phases = sorted(figures["phases_p50"].items(), key=lambda item: -item[1])
    counts = figures["phase_batches"]
    rows = "\n".join(f"| {name} | {seconds:.2f} | {counts[name]:,} |" for name, seconds in phases)
    return [
        "## Where a round's time goes",
        f"During the sustained load the connector's query ran {figures['rounds']:,} rounds with "
        f"changes; a round took {figures['round_s_p50']:.1f} s (median, from its start to its "
        f"slowest table's commit). Its {figures['table_batches']:,} table batches "
        f"held {figures['changes_p50']:,.0f} changes each (median)"
        + (
            f" and ran {figures['jobs_p50']:.0f} Spark jobs each (median, the round's shared "
            "read not counted)"
            if figures.get("jobs_p50")
            else ""
        )
        + ". Per phase, the median "
        "seconds over the table batches that spent any time in it (`records` is the round's one "
        "read and count, shared by its tables; the tables run side by side):",
        f"| phase | seconds | table batches |\n| --- | --- | --- |\n{rows}",
        *([sentence] if (sentence := _verify_sentence(figures)) else []),
    ]


def _verify_sentence(figures: RoundFigures) -> str:
    """Continuous verification's share of the run (older results: nothing)."""
    if "verify_passes" not in figures:
        return ""
    longest = figures["verify_pass_s_max"]
    return (
        f"Continuous verification (`run --verify-share`, its default) completed "
        f"{figures['verify_passes']:,} passes over a table"
        + (f", the longest in {longest:.0f} s" if longest is not None else "")
        + f", working {figures['verify_work_s']:.0f} s in all (its steps' wall time, an upper "
        f"bound of its CPU time)"
        + (f" to compare {figures['verify_rows']:,} rows" if figures.get("verify_rows") else "")
        + f", and asked for {figures['verify_resent']:,} rows to be re-sent."
    )
