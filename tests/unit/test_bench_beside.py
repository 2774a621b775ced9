"""An earlier bench run's figures beside this run's: each figure and ratio of both, by run, and the
report written again from a run's results without running anything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from changelake.bench.beside import beside_section, read_results
from changelake.bench.markdown import MISSING, TIMES
from changelake.cli import main
from changelake.exceptions import ConfigError


def run(started_at: str, ours: float, theirs: float) -> dict[str, Any]:
    """A run's results holding its snapshot rate and the baseline's, nothing else measured."""
    return {
        "started_at": started_at,
        "snapshot": {"rows_per_s": ours},
        "baseline": {"snapshot_rows_per_s": theirs},
    }


THIS = run("2026-12-07T13:40:07+00:00", 22_800.0, 17_500.0)
BEFORE = run("2026-12-07T10:47:45+00:00", 18_400.0, 13_200.0)


def test_each_figure_and_ratio_of_both_runs_side_by_side() -> None:
    heading, sentence, table = beside_section(THIS, BEFORE)
    assert heading == "## Beside an earlier run"
    assert "this run (2026-12-07 13:40 UTC)" in sentence
    assert "the run of 2026-12-07 10:47 UTC" in sentence
    lines = table.splitlines()
    assert lines[0] == (
        "| figure | changelake | baseline | ratio | changelake (2026-12-07 10:47 UTC) "
        "| baseline (2026-12-07 10:47 UTC) | ratio (2026-12-07 10:47 UTC) |"
    )
    assert (
        f"| snapshot (rows/s) | 22,800 | 17,500 | 1.30{TIMES} | 18,400 | 13,200 | 1.39{TIMES} |"
        in lines
    )
    unmeasured = [line for line in lines if line.startswith("| highest sustained")]
    assert unmeasured == ["| highest sustained (changes/s) |" + f" {MISSING} |" * 6]


def test_without_an_earlier_run_there_is_no_section() -> None:
    assert beside_section(THIS, None) == []


def test_a_file_that_is_not_a_run_s_results_is_named(tmp_path: Path) -> None:
    broken, other = tmp_path / "broken.json", tmp_path / "other.json"
    broken.write_text("{")
    other.write_text('{"views": {}}')
    for path in (broken, other, tmp_path / "missing.json"):
        with pytest.raises(ConfigError, match=str(path)):
            read_results(path)
    good = tmp_path / "results.json"
    good.write_text(json.dumps(BEFORE))
    assert read_results(good) == BEFORE


def test_the_report_is_written_again_from_a_run_s_results(tmp_path: Path) -> None:
    """`bench --report DIR --beside FILE`: DIR's report from its results.json, FILE's beside."""
    results = {
        **THIS,
        "duration_s": 10.0,
        "machine": {"cores": 2, "memory_gib": 24.0, "python": "3.11.7", "spark": "4.0.1"},
        "params": {
            "rows": 1000,
            "rate": 250,
            "seconds": 60,
            "step_rates": [250],
            "settle_s": 15,
            "max_lag_s": 120,
        },
        "timeline": [],
    }
    (tmp_path / "results.json").write_text(json.dumps(results))
    (tmp_path / "before.json").write_text(json.dumps(BEFORE))
    before = str(tmp_path / "before.json")
    assert main(["bench", "--report", str(tmp_path), "--beside", before]) == 0
    report = (tmp_path / "report.md").read_text()
    assert "## Beside an earlier run" in report
    assert f"| 18,400 | 13,200 | 1.39{TIMES} |" in report
    assert json.loads((tmp_path / "results.json").read_text())["ratios"]["snapshot_rows_per_s"] == (
        pytest.approx(22_800 / 17_500)
    )
