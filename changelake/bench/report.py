"""The benchmark's results: their JSON shape, and the report written from them.

`write_report(results, out_dir)` writes three files into `out_dir`:

- `results.json`: the `Results` dict below, verbatim except that `ratios` is (re)computed;
- `report.md`: how it was measured, then tables of figures, stages, load steps and resources;
- `freshness.png`: lag and freshness to Delta over time, with the load steps shaded.

Every figure that was not measured is `None` (JSON `null`) and reads as a dash in the report.
Rates are changes (or rows) per second, durations are seconds, memory is MiB.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from changelake.bench import markdown as md
from changelake.bench.beside import beside_section
from changelake.bench.figures import FIGURES, figure_values, get, ratios
from changelake.bench.plot import TimelinePoint, plot
from changelake.bench.query_latency import QueryFigures, query_section
from changelake.bench.quiet_tail import quiet_section
from changelake.bench.records import RecordFigures, records_section
from changelake.bench.resync_phase import ResyncCost, resync_section
from changelake.bench.rounds import RoundFigures, rounds_section
from changelake.bench.stats import StepDict, StepResult, SummaryDict, highest_bounded
from changelake.bench.step_cpu import cpu_section
from changelake.bench.steps_section import steps_section
from changelake.bench.verify_cost import VerifyCost, cost_section
from changelake.bench.views_phase import views_section

REPORT_FILES = ("results.json", "report.md", "freshness.png")
STAGE_NAMES = {
    "decoding": "Postgres decoding",
    "debezium": "Debezium",
    "spark_apply": "Spark apply into the base tables",
}


class Machine(TypedDict):
    cores: int
    memory_gib: float
    python: str
    spark: str


class Params(TypedDict):
    rows: int  # source rows the snapshot bootstraps
    rate: float  # transactions/s of the first load step (each changes ~2 rows)
    seconds: float  # length of each load step
    step_rates: list[float]  # every load step's target transactions/s, in the order run
    settle_s: float  # the start of each step that `lag_is_bounded` ignores
    max_lag_s: float  # the lag a bounded step never exceeds


class SnapshotFigures(TypedDict):
    rows: int
    seconds: float
    rows_per_s: float
    debezium_rows_per_s: NotRequired[float]  # Debezium's initial snapshot into the topics


class Sustained(TypedDict):
    steps: list[StepDict]
    highest_bounded_rate: float | None


class Freshness(TypedDict):
    delta: SummaryDict | None  # Postgres commit → the Delta commit holding it (every reader)
    search: SummaryDict | None  # Postgres commit → the change is searchable in OpenSearch


class Stage(TypedDict):
    changes_per_s: float | None
    fraction_of_decoding: float | None


class Stages(TypedDict):
    decoding: Stage  # Postgres logical decoding alone: the ceiling for everything after it
    debezium: Stage
    spark_apply: Stage  # every change in the base tables (its merge-on-write commit)


class Baseline(TypedDict):
    """The textbook foreachBatch MERGE pipeline on the same data; figures it did not run: None."""

    snapshot_rows_per_s: float | None
    highest_bounded_rate: float | None
    apply_changes_per_s: float | None
    apply_cpu_per_1000: NotRequired[float | None]  # CPU s per 1,000 changes of the backlog
    freshness: Freshness
    steps: NotRequired[list[StepDict]]  # its own sustained step-up (reports before it lack one)


class Usage(TypedDict):
    cpu_seconds: float
    peak_rss_mb: float


class _Later(TypedDict, total=False):
    """Figures that reports written before them lack (a class of its own: Python 3.11 reads
    `NotRequired` in postponed annotations as required)."""

    rounds: RoundFigures | None  # where the streaming run's time went
    records: RecordFigures | None  # change records by converter: changelake's and the stock one
    query: QueryFigures | None  # `changelake query` through the running pipeline, and alone
    quiet: NotRequired[dict[str, Any] | None]  # the quiet tail, and served queries under load
    views: dict[str, Any] | None  # views.json's views: their cost and freshness (views_phase)
    verify_cost: VerifyCost | None  # continuous verification on against off (verify_cost)
    resync: NotRequired[ResyncCost | None]  # a dropped slot re-synced by the run (resync_phase)
    # per load step, the cores each process tree used: {"changelake": [...], "baseline": [...]}
    step_cpu: NotRequired[dict[str, list[dict[str, Any]]]]
    # CPU seconds `run --once` spent per 1,000 changes of the backlog (its whole process tree)
    apply_cpu_per_1000: float | None


class Results(_Later):
    started_at: str  # ISO 8601 with a time zone
    duration_s: float
    machine: Machine
    params: Params
    snapshot: SnapshotFigures | None
    sustained: Sustained | None
    freshness: Freshness
    stages: Stages
    baseline: Baseline | None
    ratios: dict[str, float | None]  # FIGURES' keys: changelake ÷ baseline
    resources: dict[str, Usage]  # by service
    timeline: list[TimelinePoint]


def machine_info(spark: str) -> Machine:
    """This machine's cores and memory, and the versions the figures depend on."""
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    total_kb = next(int(line.split()[1]) for line in meminfo if line.startswith("MemTotal:"))
    return Machine(
        cores=os.cpu_count() or 1,
        memory_gib=round(total_kb / 2**20, 1),
        python=platform.python_version(),
        spark=spark,
    )


def stage_figures(
    decoding: float | None,
    debezium: float | None,
    spark_apply: float | None,
) -> Stages:
    """Each stage's changes/s, also as a fraction of what Postgres can decode."""

    def stage(rate: float | None) -> Stage:
        return Stage(changes_per_s=rate, fraction_of_decoding=md.ratio(rate, decoding))

    return Stages(
        decoding=stage(decoding),
        debezium=stage(debezium),
        spark_apply=stage(spark_apply),
    )


def sustained_figures(steps: Sequence[StepResult]) -> Sustained:
    """The steps, and the rate reached by the fastest one whose lag stayed bounded.

    The rate achieved, not the one asked for: a load generator that fell short must not lend the
    pipeline its target.
    """
    best = highest_bounded(steps)
    return Sustained(
        steps=[step.as_dict() for step in steps],
        highest_bounded_rate=None if best is None else best.achieved_rate,
    )


def to_json(results: Results | Mapping[str, Any]) -> str:
    return json.dumps(results, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


# --- markdown ---------------------------------------------------------------------------------


def _method(results: Mapping[str, Any]) -> str:
    params, machine = results["params"], results["machine"]
    steps = ", ".join(md.count(rate) for rate in params["step_rates"]) or md.count(params["rate"])
    return (
        f"Measured on {machine['cores']} cores and {machine['memory_gib']} GiB of memory "
        f"(Python {machine['python']}, Spark {machine['spark']}), starting {results['started_at']} "
        f"and taking {md.seconds(results['duration_s'])} s. The snapshot bootstraps "
        f"{md.count(params['rows'])} source rows from their compacted topics. The load is the "
        "demo shop's operation mix run by pgbench from several connections, paced on a "
        f"schedule. The sustained load then runs {md.seconds(params['seconds'])} s at each of "
        f"{steps} transactions/s; a step counts as sustained when, after its first "
        f"{md.seconds(params['settle_s'])} s, lag stays under {md.seconds(params['max_lag_s'])} s "
        "and does not trend upward. Freshness is the time from a Postgres commit to the Delta "
        "commit holding the change, and to the change being "
        "searchable in OpenSearch. The baseline is a textbook foreachBatch MERGE pipeline on the "
        "same data. It keeps no search index: changelake's snapshot rate leaves its index builds "
        "out, its apply rates include keeping two indexes in step. Apply is timed on a backlog "
        "written while Debezium was paused, from Spark being ready to every change being in the "
        "base tables (changelake's merge-on-write commits, the baseline's MERGEs), with the CPU "
        "seconds each process tree used for it (Spark's start included). "
        "Ratio = changelake ÷ baseline, so above 1 is better for rates and below 1 is better "
        "for CPU and freshness. Stage rates are a fraction of what Postgres' logical decoding "
        "alone delivers, the ceiling for every stage after it."
    )


def _figures_table(results: Mapping[str, Any]) -> str:
    rows = []
    for figure in FIGURES:
        ours, base = figure_values(results, figure)
        rows.append(
            [
                figure.label,
                md.cell(ours, figure.show),
                md.cell(base, figure.show),
                md.ratio_cell(ours, base),
            ]
        )
    return md.table(["figure", "changelake", "baseline", "ratio"], rows)


def _stages_table(results: Mapping[str, Any]) -> str:
    rows = [
        [
            name,
            md.cell(get(results, ("stages", key, "changes_per_s")), md.count),
            md.cell(get(results, ("stages", key, "fraction_of_decoding")), lambda f: f"{f:.1%}"),
        ]
        for key, name in STAGE_NAMES.items()
    ]
    return md.table(["stage", "changes/s", "fraction of decoding"], rows)


def _resources_table(results: Mapping[str, Any]) -> str:
    rows = [
        [name, f"{usage['cpu_seconds']:,.1f}", md.count(usage["peak_rss_mb"])]
        for name, usage in (results.get("resources") or {}).items()
    ]
    return md.table(["service", "CPU s", "peak MB"], rows)


def markdown(
    results: Results | Mapping[str, Any],
    plot_name: str = "freshness.png",
    earlier: Mapping[str, Any] | None = None,
) -> str:
    """The report; with `earlier` (a run before this one), its figures beside these."""
    day = datetime.fromisoformat(results["started_at"]).date().isoformat()
    sections = [
        f"# changelake benchmark, {day}",
        _method(results),
        _figures_table(results),
        *beside_section(results, earlier),
        "## Stages",
        _stages_table(results),
        *steps_section(
            get(results, ("sustained", "steps")) or [], get(results, ("baseline", "steps"))
        ),
        *cpu_section(results.get("step_cpu"), results["machine"]["cores"]),
        *records_section(results.get("records")),
        *rounds_section(results.get("rounds")),
        *query_section(results.get("query")),
        *quiet_section(results.get("quiet")),
        *views_section(results.get("views")),
        *cost_section(results.get("verify_cost")),
        *resync_section(results.get("resync")),
        "## Resources",
        "CPU seconds and peak resident memory (sum over each service's processes; shared memory "
        "counts once per process that maps it).",
        _resources_table(results),
        "## Freshness and lag over time",
        f"![freshness and lag]({plot_name})",
    ]
    return "\n\n".join(sections) + "\n"


def write_report(
    results: Results | Mapping[str, Any], out_dir: Path, earlier: Mapping[str, Any] | None = None
) -> tuple[Path, Path, Path]:
    """Write results.json, report.md and freshness.png into `out_dir`, the report with
    `earlier`'s figures beside these when given; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    full = {**results, "ratios": ratios(results)}
    json_path, md_path, png_path = (out_dir / name for name in REPORT_FILES)
    json_path.write_text(to_json(full))
    md_path.write_text(markdown(full, png_path.name, earlier))
    plot(full.get("timeline") or [], png_path)
    return json_path, md_path, png_path
