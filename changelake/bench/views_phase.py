"""What views.json's views cost the pipeline, and how fresh each one is (issue "Derived views").

The pipeline streams the same load twice at one rate (the first sustained step's), once alone
and once keeping the shop's views (their tables' histories, and the aggregate's rounds every
`--views-seconds`, default 30), each run started afresh on the bench lake. The cost is the
difference in freshness to Delta between the two. A view's freshness is, per change of a table
it reads, the time from its commit in Postgres to the first moment the view shows it:
- built when read (history, enrichment, windows, sessions, interval join): the first commit of
  that table's stored history holding its Kafka offset (from the commit's file statistics);
- aggregate: the first commit of the view's own table whose recorded offsets pass it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from changelake.bench import markdown as md
from changelake.bench.pgbench_load import PgbenchRun
from changelake.bench.stats import summarize
from changelake.bench.visibility import (
    Change,
    Visible,
    commits,
    freshness_figures,
    freshness_of,
    topic_changes,
)
from changelake.chaos.pipeline_process import PipelineProcess
from changelake.lake.layout import history_of
from changelake.views.config import ViewSpec, load_views
from changelake.views.derived import VIEWS

Say = Callable[[str], None]
Wait = Callable[[Callable[[], bool], str, float], None]
OFFSET = "_kafka_offset"


@dataclass(frozen=True)
class ViewsRun:
    bootstrap: str
    env: Mapping[str, str]
    lake: Path
    tables: Mapping[str, Path]  # topic → base table
    names: Mapping[str, str]  # topic → table name
    log: Path
    views_config: Path  # the shop's views.json
    load: Callable[[float], PgbenchRun]  # the load at a rate, for the phase's duration
    ends: Callable[[], dict[str, dict[int, int]]]  # each topic's end offsets now
    streaming: Callable[[], bool]
    caught_up: Callable[[], bool]
    wait: Wait
    say: Say


def measure(run: ViewsRun, rate: float) -> dict[str, Any]:
    """Both runs at `rate`: the freshness to Delta without and with views, and each view's."""
    specs = load_views(run.views_config)
    figures: dict[str, Any] = {"rate": rate}
    for label, config in (("without", None), ("with", run.views_config)):
        start = _streamed(run, specs, rate, label, config)
        delta = freshness_figures(run.bootstrap, run.tables, start, {}, run.say)[0]["delta"]
        figures[label] = {"delta": delta}
        if config is not None:
            figures["views"] = _view_freshness(run, specs, start)
    return figures


def _streamed(
    run: ViewsRun, specs: list[ViewSpec], rate: float, label: str, config: Path | None
) -> dict[str, dict[int, int]]:
    """A fresh run streams the load (keeping the views of `config`) until it and its views
    have caught up; returns where the topics ended before the load."""
    env = dict(run.env)
    if config is not None:
        env["CHANGELAKE_VIEWS_CONFIG"] = str(config)
    pipeline = PipelineProcess(env, run.log, ("--trigger-seconds", "1"))
    run.say(f"bench: views: the pipeline {label} views.json's views at {rate:g}/s")
    pipeline.start()
    try:
        run.wait(
            lambda: pipeline.alive() and run.streaming() and _ready(run, specs, config),
            "the pipeline to stream (its views started)",
            900,
        )
        start = run.ends()
        load = run.load(rate)
        run.say(f"  {load.row_changes:,} row changes in {load.transactions:,} transactions")
        run.wait(
            lambda: run.caught_up() and _views_caught_up(run, specs, config),
            "the pipeline and its views to catch up",
            300,
        )
    finally:
        pipeline.stop()
    return start


def _ready(run: ViewsRun, specs: list[ViewSpec], config: Path | None) -> bool:
    """Every history started and every aggregate computed once (its first, whole round)."""
    if config is None:
        return True
    return all(_exists(p) for p in _paths(run, specs))


def _paths(run: ViewsRun, specs: list[ViewSpec]) -> list[Path]:
    by_name = {n: run.tables[t] for t, n in run.names.items()}
    paths = [Path(history_of(str(by_name[t]))) for s in specs for t in s.tables if t in by_name]
    return paths + [run.lake / VIEWS / s.name for s in specs if s.aggregate]


def _exists(path: Path) -> bool:
    return (path / "_delta_log").is_dir()


def _views_caught_up(run: ViewsRun, specs: list[ViewSpec], config: Path | None) -> bool:
    """An aggregate's newest commit records the offsets its tables' topics end at."""
    if config is None:
        return True
    ends = run.ends()
    for spec in (s for s in specs if s.aggregate):
        recorded = recorded_offsets(run.lake / VIEWS / spec.name)
        for topic, name in run.names.items():
            if name in spec.tables:
                have = (recorded[-1][1].get(name) or {}) if recorded else {}
                if any(int(have.get(str(p), 0)) < high - 1 for p, high in ends[topic].items()):
                    return False
    return True


def recorded_offsets(view: Path) -> list[tuple[int, dict[str, dict[str, int]]]]:
    """(commit ms, offsets per table) of each commit of an aggregate view's table."""
    out = []
    for at, meta in commits(view):
        tables = meta.get("tables") or {}
        out.append((at, {t: v.get("offsets") or {} for t, v in tables.items()}))
    return out


def history_moments(history: Path) -> list[Visible]:
    """When each history commit made its changes visible: its newest Kafka offset (single
    partition topics), from the statistics of the files it added."""
    moments = []
    for entry in sorted((history / "_delta_log").glob("*.json")):
        at, newest = 0, -1
        for line in entry.read_text().splitlines():
            action = json.loads(line)
            if "commitInfo" in action:
                at = int(action["commitInfo"]["timestamp"])
            stats = (action.get("add") or {}).get("stats")
            if stats:
                high = (json.loads(stats).get("maxValues") or {}).get(OFFSET)
                newest = max(newest, int(high)) if high is not None else newest
        if newest >= 0:
            moments.append(Visible(at, newest + 1))
    return moments


def _view_freshness(
    run: ViewsRun, specs: list[ViewSpec], start: Mapping[str, dict[int, int]]
) -> dict[str, Any]:
    changes = {t: topic_changes(run.bootstrap, t, start[t]) for t in run.tables}
    by_name = {n: t for t, n in run.names.items()}
    out: dict[str, Any] = {}
    for spec in specs:
        seconds: list[float] = []
        if spec.aggregate:
            recorded = recorded_offsets(run.lake / VIEWS / spec.name)
            for name in spec.tables:
                moments = [Visible(at, int(o.get(name, {}).get("0", 0))) for at, o in recorded]
                seconds += by_offset(changes[by_name[name]], moments)
        else:  # built when read from its first table's history
            topic = by_name[spec.table]
            history = Path(history_of(str(run.tables[topic])))
            seconds = by_offset(changes[topic], history_moments(history))
        out[spec.name] = {"kind": spec.kind, **(summarize(seconds).as_dict() if seconds else {})}
    return out


def by_offset(changes: list[Change], moments: list[Visible]) -> list[float]:
    """Freshness by Kafka offset: a moment's `max_lsn` holds the next offset it has not."""
    return [s for _, s in freshness_of(changes, moments, position=lambda c: c.offset + 1)]


def views_section(figures: Mapping[str, Any] | None) -> list[str]:
    """The report's section: the cost to the pipeline, then each view's freshness."""
    if not figures or "with" not in figures:
        return []
    rows = [
        [
            label,
            md.cell((figures[label].get("delta") or {}).get("p50"), md.seconds),
            md.cell((figures[label].get("delta") or {}).get("p99"), md.seconds),
        ]
        for label in ("without", "with")
    ]
    views = [
        [
            name,
            v["kind"],
            md.cell(v.get("p50"), md.seconds),
            md.cell(v.get("p99"), md.seconds),
            md.cell(v.get("count"), md.count),
        ]
        for name, v in (figures.get("views") or {}).items()
    ]
    return [
        "## Derived views",
        f"The same load at {md.count(figures['rate'])} transactions/s, streamed by the pipeline "
        "alone and then keeping views.json's views: freshness to Delta (commit → queryable).",
        md.table(["views", "freshness p50 (s)", "p99 (s)"], rows),
        "Each view's freshness: commit → the view shows the change (a view built when read: its "
        "table's history has it; an aggregate: its round has recorded it).",
        md.table(["view", "kind", "p50 (s)", "p99 (s)", "changes"], views),
    ]
