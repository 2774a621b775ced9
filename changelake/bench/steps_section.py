"""The report's load steps: per step, the rate asked for and reached, whether lag stayed
bounded, and the freshness of the changes committed during it; changelake's, then the
baseline's under the same step-up."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from changelake.bench import markdown as md


def _steps_table(steps: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        [
            md.count(s["target_rate"]),
            md.cell(s.get("achieved_transactions"), md.count),
            md.count(s["achieved_rate"]),
            "yes" if s["bounded"] else "no",
            md.cell(s.get("freshness_p50"), md.seconds),
            md.cell(s.get("freshness_p99"), md.seconds),
        ]
        for s in steps
    ]
    header = ["target transactions/s", "achieved transactions/s", "row changes/s", "lag bounded"]
    header += ["freshness to Delta p50 (s)", "p99 (s)"]
    return md.table(header, rows) + _steps_caveat(steps) + _between_note(steps)


def steps_section(
    ours: Sequence[Mapping[str, Any]], baseline: Sequence[Mapping[str, Any]] | None
) -> list[str]:
    """The report's load steps: changelake's, then the baseline's when it ran them."""
    section = ["## Load steps", _steps_table(ours)]
    if not baseline:
        return section
    return [
        *section,
        "The baseline under the same step-up (changelake's connector paused, the baseline's "
        "streaming from the load's start, one micro-batch a second like changelake's run; "
        "freshness read from its queries' checkpoints):",
        _steps_table(baseline),
    ]


def _steps_caveat(steps: Sequence[Mapping[str, Any]]) -> str:
    """When every step stayed bounded, the highest rate is only a lower bound; say what limited
    it if the load generator (which shares the machine) fell short of its target."""
    if not steps or not all(s["bounded"] for s in steps):
        return ""
    last = steps[-1]
    text = "\n\nEvery step kept lag bounded: the highest sustained rate is a lower bound."
    reached = last.get("achieved_transactions")
    if reached is not None and reached < 0.9 * last["target_rate"]:
        text += (
            f" The load generator, sharing the machine, reached {md.count(reached)} of the"
            f" {md.count(last['target_rate'])} transactions/s asked for in the last step."
        )
    return text


def _between_note(steps: Sequence[Mapping[str, Any]]) -> str:
    """A last step slower than the one before it is the step in between (`run_steps`)."""
    if len(steps) < 2 or steps[-1]["target_rate"] >= steps[-2]["target_rate"]:
        return ""
    return (
        "\n\nThe last step ran once the backlog of the one before it had drained, halfway"
        " between the last bounded rate and the first unbounded one."
    )
