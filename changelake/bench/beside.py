"""An earlier run's figures beside this run's. The machine's speed moves between runs (by a third
on the two-core machine the committed reports come from), so a ratio to the baseline counts when
two runs of the same code give it: this section shows each figure and each ratio of both runs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from changelake.bench import markdown as md
from changelake.bench.figures import FIGURES, figure_values
from changelake.exceptions import ConfigError


def started(results: Mapping[str, Any]) -> str:
    """A run's name in the report: when it started, to the minute, in UTC."""
    return datetime.fromisoformat(results["started_at"]).strftime("%Y-%m-%d %H:%M UTC")


def read_results(path: Path) -> dict[str, Any]:
    """An earlier run's results.json, or an error naming the file and what is wrong with it."""
    try:
        results = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"bench: cannot read {path}: {e}", "name a bench's results.json") from e
    if not isinstance(results, dict) or "started_at" not in results:
        raise ConfigError(
            f"bench: {path} is not a bench's results.json (it has no `started_at`)",
            "name the results.json a `changelake bench` run wrote",
        )
    return results


def beside_section(results: Mapping[str, Any], earlier: Mapping[str, Any] | None) -> list[str]:
    """The report's markdown with `earlier`'s figures beside `results`', or nothing without one."""
    if not earlier:
        return []
    rows = []
    for figure in FIGURES:
        cells = [figure.label]
        for run in (results, earlier):
            ours, base = figure_values(run, figure)
            cells += [md.cell(ours, figure.show), md.cell(base, figure.show)]
            cells.append(md.ratio_cell(ours, base))
        rows.append(cells)
    this, before = started(results), started(earlier)
    per_run = ["changelake", "baseline", "ratio"]
    return [
        "## Beside an earlier run",
        f"Each figure of this run ({this}) beside the run of {before}, each against its own "
        "run's baseline: the machine's speed moves between runs, so compare the ratios.",
        md.table(["figure", *per_run, *(f"{h} ({before})" for h in per_run)], rows),
    ]
