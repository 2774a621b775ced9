"""The figures the report sets beside the baseline's: where each lives in the results, how it
reads, and the ratio changelake ÷ baseline (above 1 is better for rates, below for freshness and
CPU)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from changelake.bench import markdown as md

PERCENTILES = ("p50", "p95", "p99")


@dataclass(frozen=True)
class Comparison:
    """One row of the main table: where changelake's and the baseline's value live."""

    key: str
    label: str
    ours: tuple[str, ...]  # path into Results
    baseline: tuple[str, ...]  # path into Results["baseline"]
    show: Callable[[float], str]


def _freshness_figures(sink: str, name: str) -> list[Comparison]:
    return [
        Comparison(
            key=f"{sink}_{p}",
            label=f"freshness to {name} {p} (s)",
            ours=("freshness", sink, p),
            baseline=("freshness", sink, p),
            show=md.seconds,
        )
        for p in PERCENTILES
    ]


FIGURES = (
    Comparison(
        key="snapshot_rows_per_s",
        label="snapshot (rows/s)",
        ours=("snapshot", "rows_per_s"),
        baseline=("snapshot_rows_per_s",),
        show=md.count,
    ),
    Comparison(
        key="highest_bounded_rate",
        label="highest sustained (changes/s)",
        ours=("sustained", "highest_bounded_rate"),
        baseline=("highest_bounded_rate",),
        show=md.count,
    ),
    Comparison(
        key="apply_changes_per_s",
        label="Spark apply into the base tables (changes/s)",
        ours=("stages", "spark_apply", "changes_per_s"),
        baseline=("apply_changes_per_s",),
        show=md.count,
    ),
    Comparison(
        key="apply_cpu_per_1000",
        label="CPU seconds per 1,000 changes applied (the backlog, whole process)",
        ours=("apply_cpu_per_1000",),
        baseline=("apply_cpu_per_1000",),
        show=md.seconds,
    ),
    *_freshness_figures("delta", "Delta (every reader)"),
    *_freshness_figures("search", "search"),
)


def get(data: Any, path: Sequence[str]) -> Any:
    for key in path:
        if not isinstance(data, Mapping) or data.get(key) is None:
            return None
        data = data[key]
    return data


def figure_values(results: Mapping[str, Any], figure: Comparison) -> tuple[Any, Any]:
    return get(results, figure.ours), get(results, ("baseline", *figure.baseline))


def ratios(results: Mapping[str, Any]) -> dict[str, float | None]:
    """changelake ÷ baseline for every figure: above 1 is better for rates, below for freshness
    and CPU."""
    return {f.key: md.ratio(*figure_values(results, f)) for f in FIGURES}
