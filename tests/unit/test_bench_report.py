"""The benchmark report: results.json round-trips, report.md shows the figures, a PNG is drawn."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from changelake.bench.markdown import MISSING, TIMES
from changelake.bench.plot import TimelinePoint
from changelake.bench.report import (
    Baseline,
    Freshness,
    Results,
    machine_info,
    markdown,
    ratios,
    stage_figures,
    sustained_figures,
    write_report,
)
from changelake.bench.stats import StepResult, Summary

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def row(*cells: str | None) -> str:
    """A markdown table row as the report writes it, with a dash for a missing value."""
    return "| " + " | ".join(MISSING if c is None else c for c in cells) + " |"


def times(ratio: str) -> str:
    return ratio + TIMES


def timeline() -> list[TimelinePoint]:
    points: list[TimelinePoint] = []
    for t in range(40):
        rate = 500.0 if t < 20 else 1000.0
        points.append({"t": float(t), "lag_s": 0.5 + (t >= 20) * 0.1 * (t - 20), "rate": rate})
        points.append({"t": t + 0.5, "delta_freshness_s": 1.0 + t / 40})
    return points


@pytest.fixture
def results() -> Results:
    steps = [
        StepResult(500, 498.4, True, ((5.0, 0.5), (10.0, 0.6)), None, 0.75, 1.5),
        StepResult(1000, 951.0, False, ((5.0, 2.0), (10.0, 4.0))),
    ]
    return Results(
        started_at="2026-03-14T09:26:53+00:00",
        duration_s=312.46,
        machine={"cores": 2, "memory_gib": 7.8, "python": "3.11.7", "spark": "4.2.0"},
        params={
            "rows": 100_000,
            "rate": 500,
            "seconds": 60,
            "step_rates": [500, 1000],
            "settle_s": 10,
            "max_lag_s": 30,
        },
        snapshot={"rows": 100_000, "seconds": 5.0, "rows_per_s": 20_000.0},
        sustained=sustained_figures(steps),
        freshness=Freshness(
            delta=Summary(120, 0.8123, 1.96, 12.345, 14.0).as_dict(),
            search=Summary(30, 1.2, 2.5, 3.75, 4.0).as_dict(),
        ),
        stages=stage_figures(390_000.0, 40_000.0, 1_200.0),
        baseline=Baseline(
            snapshot_rows_per_s=5_000.0,
            highest_bounded_rate=249.2,
            apply_changes_per_s=None,
            apply_cpu_per_1000=40.0,
            freshness=Freshness(
                delta=Summary(60, 3.2492, 7.84, 123.4, 130.0).as_dict(), search=None
            ),
            steps=[StepResult(500, 480.0, False, ((5.0, 40.0), (10.0, 80.0))).as_dict()],
        ),
        ratios={},
        apply_cpu_per_1000=12.5,
        resources={
            "postgres": {"cpu_seconds": 12.34, "peak_rss_mb": 1234.4},
            "pipeline": {"cpu_seconds": 250.0, "peak_rss_mb": 987.6},
        },
        timeline=timeline(),
    )


def test_derived_figures() -> None:
    stages = stage_figures(390_000.0, 39_000.0, None)
    assert stages["decoding"] == {"changes_per_s": 390_000.0, "fraction_of_decoding": 1.0}
    assert stages["debezium"]["fraction_of_decoding"] == pytest.approx(0.1)
    assert stages["spark_apply"] == {"changes_per_s": None, "fraction_of_decoding": None}
    assert stage_figures(None, 1.0, 1.0)["debezium"]["fraction_of_decoding"] is None
    steps = [StepResult(100, 99, True), StepResult(200, 190, True), StepResult(400, 300, False)]
    assert sustained_figures(steps)["highest_bounded_rate"] == 190  # achieved, not targeted
    assert sustained_figures(steps[2:])["highest_bounded_rate"] is None
    machine = machine_info("4.2.0")
    assert machine["cores"] >= 1 and machine["memory_gib"] > 0 and machine["spark"] == "4.2.0"


def test_ratios_are_ours_over_the_baseline(results: Results) -> None:
    got = ratios(results)
    assert got["snapshot_rows_per_s"] == pytest.approx(4.0)
    assert got["highest_bounded_rate"] == pytest.approx(498.4 / 249.2)
    assert got["delta_p50"] == pytest.approx(0.8123 / 3.2492)
    assert got["apply_changes_per_s"] is None  # the baseline has no figure
    assert got["search_p99"] is None
    assert set(ratios({**results, "baseline": None}).values()) == {None}


def test_the_report_files_are_written(results: Results, tmp_path: Path) -> None:
    out = tmp_path / "bench" / "run-1"
    paths = write_report(results, out)
    assert paths == (out / "results.json", out / "report.md", out / "freshness.png")
    assert paths[2].read_bytes().startswith(PNG_MAGIC)
    assert json.loads(paths[0].read_text()) == {**results, "ratios": ratios(results)}
    assert results["ratios"] == {}  # the caller's dict is left alone


def test_the_markdown_shows_each_figure(results: Results) -> None:
    text = markdown({**results, "ratios": ratios(results)})
    assert text.startswith("# changelake benchmark, 2026-03-14\n")
    assert "100,000 source rows" in text
    assert "runs 60.0 s at each of 500, 1,000 transactions/s" in text
    for line in [
        row("figure", "changelake", "baseline", "ratio"),
        row("snapshot (rows/s)", "20,000", "5,000", times("4.00")),
        row("highest sustained (changes/s)", "498", "249", times("2.00")),
        row("Spark apply into the base tables (changes/s)", "1,200", None, None),
        row(
            "CPU seconds per 1,000 changes applied (the backlog, whole process)",
            "12.5",
            "40.0",
            times("0.31"),
        ),
        row("freshness to Delta (every reader) p50 (s)", "0.81", "3.25", times("0.25")),
        row("freshness to Delta (every reader) p95 (s)", "1.96", "7.84", times("0.25")),
        row("freshness to Delta (every reader) p99 (s)", "12.3", "123", times("0.10")),
        row("freshness to search p50 (s)", "1.20", None, None),
        row("freshness to search p99 (s)", "3.75", None, None),
        row("Postgres decoding", "390,000", "100.0%"),
        row("Debezium", "40,000", "10.3%"),
        row("Spark apply into the base tables", "1,200", "0.3%"),
        row("500", MISSING, "498", "yes", "0.75", "1.50"),
        row("1,000", MISSING, "951", "no", None, None),
        row("postgres", "12.3", "1,234"),
        row("pipeline", "250.0", "988"),
        "![freshness and lag](freshness.png)",
    ]:
        assert line + "\n" in text
    baseline_steps = text.split("The baseline under the same step-up", 1)[1]
    assert row("500", None, "480", "no", None, None) in baseline_steps


def test_a_run_with_nothing_but_parameters_still_reports(results: Results, tmp_path: Path) -> None:
    bare = copy.deepcopy(results)
    bare.update(
        snapshot=None,
        sustained=None,
        freshness=Freshness(delta=None, search=None),
        stages=stage_figures(None, None, None),
        baseline=None,
        resources={},
        timeline=[],
    )
    _, md_path, png_path = write_report(bare, tmp_path)
    text = md_path.read_text()
    assert row("snapshot (rows/s)", None, None, None) in text
    assert row("freshness to Delta (every reader) p99 (s)", None, None, None) in text
    assert row("Debezium", None, None) in text
    assert png_path.read_bytes().startswith(PNG_MAGIC)


def test_all_steps_bounded_reads_as_a_lower_bound_and_names_a_short_load(
    results: Results,
) -> None:
    steps = [
        StepResult(100, 201, True, achieved_transactions=99.5).as_dict(),
        StepResult(800, 385, True, achieved_transactions=190.0).as_dict(),
    ]
    shown = {**results, "sustained": {"steps": steps, "highest_bounded_rate": 385}}
    text = markdown({**shown, "ratios": ratios(shown)})
    assert "| 800 | 190 | 385 | yes |" in text
    assert "the highest sustained rate is a lower bound" in text
    assert "reached 190 of the 800 transactions/s" in text


def test_a_step_in_between_is_named_and_counts_by_its_rate(results: Results) -> None:
    steps = [
        StepResult(2000, 3900, True, achieved_transactions=2000),
        StepResult(4000, 6500, False, achieved_transactions=3400),
        StepResult(3000, 5600, True, achieved_transactions=2900),
    ]
    shown = {**results, "sustained": sustained_figures(steps)}
    assert shown["sustained"]["highest_bounded_rate"] == 5600
    text = markdown({**shown, "ratios": ratios(shown)})
    assert "| 3,000 | 2,900 | 5,600 | yes |" in text
    assert "halfway between the last bounded rate and the first unbounded one" in text


def test_the_records_section_compares_the_converters_per_figure(results: Results) -> None:
    results["records"] = {
        "lean": {"bytes_per_record": {"orders": 500.0}, "changes_per_s": 9000.0},
        "stock": {"bytes_per_record": {"orders": 4000.0}, "changes_per_s": 3000.0},
    }
    text = markdown(results)
    assert "## Change records: lean vs stock converter" in text
    assert "| bytes per record, orders | 500 | 4,000 | 0.12\u00d7 |" in text
    assert (
        "| Debezium streaming, alone on the same WAL (changes/s) | 9,000 | 3,000 | 3.00\u00d7 |"
        in text
    )
    assert "Connect CPU s during the snapshot | \u2013 | \u2013 | \u2013 |" in text
    del results["records"]
    assert "Change records" not in markdown(results)  # reports written before it


def test_the_quiet_tail_and_served_queries_under_load_are_reported() -> None:
    from changelake.bench.quiet_tail import quiet_section

    figures = {
        "quiet_tail_s": 21.4,
        "served_under_load_s": [1.5, 1.9],
        "served_under_load_p50": 1.7,
        "served_idle_s": [0.9, 1.1],
        "served_idle_p50": 1.0,
    }
    text = "\n".join(quiet_section(figures))
    assert "**21.4 s**" in text and "**1.70 s** under that load" in text
    assert "**1.00 s** idle" in text
    assert "more than" in "\n".join(quiet_section({**figures, "quiet_tail_s": None}))
    assert quiet_section(None) == []


def test_what_continuous_verification_costs_is_reported(tmp_path: Path) -> None:
    from changelake.bench.verify_cost import VerifyCost, cost_section, passes_in, worked_s
    from changelake.verify.verified import pass_line, work_line

    log = tmp_path / "verify-cost-1.log"
    log.write_text(f"2026-11-27T20:04:40+0000 INFO    {work_line(3, 60_000, 24.3)}\n")
    assert worked_s(log) == 24.3 and worked_s(tmp_path / "none.log") == 0
    passed = tmp_path / "verify-pass.log"
    passed.write_text(
        "".join(
            f"2026-11-28T12:00:0{i}+0000 INFO    {line}\n"
            for i, line in enumerate(
                [
                    pass_line("orders", 526_432, 301.4, 61.3),
                    pass_line("order_lines", 1_314_117, 330, 120.5),
                    pass_line("orders", 526_432, 280, 60),  # a second pass: the first counts
                ]
            )
        )
    )
    passes = passes_in(passed)
    assert passes == [
        {"table": "orders", "rows": 526_432, "seconds": 301.0, "work_s": 61.3},
        {"table": "order_lines", "rows": 1_314_117, "seconds": 330.0, "work_s": 120.5},
    ]
    assert passes_in(tmp_path / "none.log") == []
    cost = VerifyCost(
        share=0.1,
        rate=250.0,
        seconds=90.0,
        warmup_s=30.0,
        on_p50_s=11.0,
        off_p50_s=10.0,
        run_p50_s=[10.5, 9.0, 10.1, 11.2, None, 12.0],
        commits=[40, 43],
        ratio=1.1,
        on_cpu_s=140.0,
        off_cpu_s=135.0,
        work_s=24.3,
        order=[True, False, False, True, True, False],
        passes=passes,
        pass_cpu_s=250.0,
    )
    text = "\n".join(cost_section(cost))
    assert "without it, 3 times each (on, off, off, on, on, off): freshness" in text
    assert "each of the bench's 2 tables (1,840,549 rows)" in text
    assert "the longest 330 s, the first passes' steps working 182 s, the run's CPU 250 s" in text
    assert "takes about 55 minutes on an idle machine" in text
    assert "(250 transactions/s for 120 s)" in text
    assert (
        "(+10%; the limit is +10%) over every table commit after each run's first 30 s of "
        "load (40 and 43 commits; each run's own median: with it 10.5 / 11.2 / - s, without "
        "9.0 / 10.1 / 12.0 s), the run's CPU" in text
    )
    newer = ("passes", "pass_cpu_s", "order", "warmup_s", "run_p50_s", "commits")
    older = {k: v for k, v in cost.items() if k not in newer}
    said = "\n".join(cost_section(older))  # type: ignore[arg-type]
    assert "A full pass" not in said and "twice each (on, off, off, on)" in said
    assert "(250 transactions/s for 90 s)" in said and "every table commit" not in said
    assert "freshness p50 11.0 s with it, 10.0 s without (+10%; the limit" in text
    assert "the run's CPU 140 s against 135 s per run" in text
    assert "No table commits" in "\n".join(cost_section({**cost, "ratio": None}))
    assert cost_section(None) == []


def test_what_re_syncing_a_lost_slot_costs_is_reported() -> None:
    from changelake.bench.resync_phase import DELETED, ResyncCost, resync_section

    cost = ResyncCost(
        rate=250.0,
        gap_s=30.0,
        noticed_s=14.2,
        resynced_s=412.6,
        equal_s=530.1,
        rows_resent=1_840_549,
        deleted=312,
    )
    text = "\n".join(resync_section(cost))
    assert "wrote 30 s at 250 transactions/s" in text
    assert "began re-syncing by itself 14 s after the drop" in text
    assert "had re-synced 413 s after it" in text
    assert "1,840,549 rows sent again by an incremental snapshot, 312 rows deleted" in text
    assert "530 s after the drop." in text
    assert "never (verify differed)" in "\n".join(resync_section({**cost, "equal_s": None}))
    assert resync_section(None) == []
    line = (
        "re-sync of bench-postgres done: orders, order_lines sent again from the source, 1,234"
        " rows deleted during the gap deleted from the lake"
    )
    assert DELETED.findall(line) == ["1,234"]
