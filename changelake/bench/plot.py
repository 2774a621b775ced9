"""The benchmark's plot: lag per commit and freshness to Delta per change over the sustained
load, with the load steps shaded."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Required, TypedDict


class TimelinePoint(TypedDict, total=False):
    """What was observed at `t` seconds after the sustained load started; any field may be absent.

    `rate` is the target rate of the load step in force at `t`.
    """

    t: Required[float]
    lag_s: float
    delta_freshness_s: float
    rate: float


def _step_spans(timeline: Sequence[TimelinePoint]) -> list[tuple[float, float, float]]:
    """(start, end, rate) for each run of points under the same load step."""
    spans: list[tuple[float, float, float]] = []
    for point in sorted((p for p in timeline if "rate" in p), key=lambda p: p["t"]):
        if spans and spans[-1][2] == point["rate"]:
            spans[-1] = (spans[-1][0], point["t"], point["rate"])
        else:
            if spans:  # a step lasts until the next one starts
                spans[-1] = (spans[-1][0], point["t"], spans[-1][2])
            spans.append((point["t"], point["t"], point["rate"]))
    return spans


def plot(timeline: Sequence[TimelinePoint], path: Path) -> None:
    """Lag (top) and freshness to Delta (bottom) against seconds since the load started."""
    # imported here: matplotlib takes a noticeable time to import, and only this needs it
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 6), layout="constrained")
    FigureCanvasAgg(fig)  # Agg, without pyplot's global state: safe off the main thread
    lag_ax, fresh_ax = fig.subplots(2, 1, sharex=True)
    lag = sorted((p["t"], p["lag_s"]) for p in timeline if "lag_s" in p)
    fresh = [(p["t"], p["delta_freshness_s"]) for p in timeline if "delta_freshness_s" in p]
    lag_ax.plot([t for t, _ in lag], [v for _, v in lag], color="tab:red", linewidth=1)
    fresh_ax.scatter([t for t, _ in fresh], [v for _, v in fresh], s=6, color="tab:blue")
    for number, (start, end, rate) in enumerate(_step_spans(timeline)):
        for ax in (lag_ax, fresh_ax):
            ax.axvspan(start, end, color="grey", alpha=0.12 if number % 2 else 0.04, linewidth=0)
        label = f" {rate:,.0f}/s"
        lag_ax.text(
            start, 0.97, label, transform=lag_ax.get_xaxis_transform(), va="top", fontsize=8
        )
    if not timeline:
        for ax in (lag_ax, fresh_ax):
            ax.text(0.5, 0.5, "no timeline recorded", transform=ax.transAxes, ha="center")
            ax.set_xticks([])
    for ax in (lag_ax, fresh_ax):
        ax.set_ylim(bottom=0)  # a zero baseline, so a small wobble does not look like a trend
    lag_ax.set_ylabel("lag (s)")
    fresh_ax.set_ylabel("commit → Delta (s)")
    fresh_ax.set_xlabel("seconds since the sustained load started")
    fig.savefig(path, format="png", dpi=100)
