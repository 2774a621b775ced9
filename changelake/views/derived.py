"""The views of views.json as readers see them: a history or an enrichment built, when read,
from the stored histories of the tables it reads (views/), so it is as fresh as they are; an
aggregate read from the Delta table `run` maintains for it (views/maintenance.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from changelake.exceptions import ConfigError
from changelake.lake.delta_log import commit_info, newest_version
from changelake.lake.layout import delta_exists, history_of
from changelake.lake.table import covered
from changelake.lake.transactions import ReadPoint
from changelake.settings import Settings
from changelake.tables import TableRef
from changelake.views.aggregate import aggregated
from changelake.views.config import ViewSpec, project_views
from changelake.views.enrichment import changes, enriched
from changelake.views.interval_config import IntervalJoin
from changelake.views.interval_join import interval_join
from changelake.views.stored_history import read_history, rows_at, stored_history, versions_of
from changelake.views.window_config import EventTime
from changelake.views.windows import sessions, windows

NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")

VIEWS = "_views"  # where aggregate views keep their rows: <lake>/_views/<name>


def view_path(lake: str, name: str) -> str:
    return f"{lake.rstrip('/')}/{VIEWS}/{name}"


@dataclass(frozen=True)
class DerivedView:
    spec: ViewSpec
    refs: tuple[TableRef, ...]  # spec.tables, in order
    paths: tuple[str, ...]  # their base tables
    stored_at: str = ""  # an aggregate view's own Delta table

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def watched(self) -> tuple[str, ...]:
        """The Delta tables whose new versions change what it shows."""
        return (self.stored_at,) if self.stored_at else tuple(map(history_of, self.paths))


def derived_views(
    settings: Settings, refs: list[TableRef], specs: list[ViewSpec] | None = None
) -> list[DerivedView]:
    """The declared views (`specs`, else views.json's, which `captured` checked) whose tables
    are all among `refs`."""
    by_name = {r.name: r for r in refs}
    if specs is None:
        specs = project_views(settings)
    found = []
    for spec in specs:
        if all(t in by_name for t in spec.tables):
            reads = tuple(by_name[t] for t in spec.tables)
            paths = tuple(r.path(settings.lake) for r in reads)
            stored_at = view_path(settings.lake, spec.name) if spec.aggregate else ""
            found.append(DerivedView(spec, reads, paths, stored_at))
    return found


def recorded(spark: SparkSession, path: str) -> dict[str, Any] | None:
    """What the view's newest commit recorded: fingerprint, and per table offsets and truncate."""
    if not delta_exists(spark, path):
        return None
    info = commit_info(spark, path, newest_version(spark, path))
    try:
        doc = json.loads((info or {}).get("userMetadata") or "")
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and doc.get("changelake_view") == 1 else None


At = Mapping[str, ReadPoint]  # per connector (topic prefix): the transactions a read takes


def build_view(spark: SparkSession, view: DerivedView, at: At | None = None) -> DataFrame | None:
    """The view as of its tables' stored histories (or of the transactions `at` takes from
    them); None until they all have one."""
    points = tuple(at.get(r.prefix) for r in view.refs) if at is not None else None
    if points is not None and None in points:  # a table of it has no history to read at one
        return None
    if view.spec.kind == "history":
        return read_history(spark, view.paths[0], _first(points))
    if view.stored_at and points is not None:  # computed whole from the tables at the point
        return _aggregate_at(spark, view, points)
    if view.stored_at:  # maintained by `run`
        exists = delta_exists(spark, view.stored_at)
        return spark.read.format("delta").load(view.stored_at) if exists else None
    if view.spec.event_time is not None:
        return _event_time(spark, view, view.spec.event_time, _first(points))
    if view.spec.interval is not None:
        return _interval(spark, view, view.spec.interval, _first(points))
    return _enrichment(spark, view, points)


def _first(points: tuple[ReadPoint | None, ...] | None) -> ReadPoint | None:
    return points[0] if points else None


def _aggregate_at(
    spark: SparkSession, view: DerivedView, points: tuple[ReadPoint | None, ...]
) -> DataFrame | None:
    agg = view.spec.aggregate
    assert agg is not None
    current: dict[str, DataFrame] = {}
    for name, path, point in zip(view.spec.tables, view.paths, points, strict=True):
        rows = rows_at(spark, path, point) if point is not None else None
        if rows is None:
            return None
        current[name] = rows
    meta = covered(spark, view.paths[0])
    return aggregated(agg, view.spec.table, meta.key, current) if meta is not None else None


def _interval(
    spark: SparkSession, view: DerivedView, spec: IntervalJoin, at: ReadPoint | None
) -> DataFrame | None:
    from pyspark.errors import AnalysisException

    found = stored_history(spark, view.paths[0], at)
    if found is None:
        return None
    versions = versions_of(*found)
    for side, event in (("first", spec.first), ("second", spec.second)):
        where = f"{view.spec.where}.{side}"
        _timestamp(f"{where}.time", view.spec.table, event.time, versions)
        try:
            versions.where(F.expr(event.when))
        except AnalysisException as exc:
            message = str(exc).splitlines()[0]
            raise ConfigError(f"{where}.when: {event.when!r} does not read: {message}") from None
    return interval_join(versions, found[1], spec)


def _timestamp(where: str, table: str, column: str, versions: DataFrame) -> None:
    kind = dict(versions.dtypes).get(column)
    if kind not in ("timestamp", "timestamp_ntz", "date"):
        what = f"a {kind} column" if kind else "no such column"
        raise ConfigError(f"{where}: {table}.{column} is {what}, not a timestamp or date")


def _event_time(
    spark: SparkSession, view: DerivedView, spec: EventTime, at: ReadPoint | None
) -> DataFrame | None:
    versions = read_history(spark, view.paths[0], at)
    if versions is None:
        return None
    where, table = view.spec.where, view.spec.table
    _timestamp(f"{where}.time", table, spec.time, versions)
    for name, column in spec.sums:
        if not dict(versions.dtypes).get(column, "").startswith(NUMERIC):
            raise ConfigError(f"{where}.sum.{name}: {table} has no numeric column {column}")
    for column in spec.by:
        if column not in versions.columns or column.startswith("_"):
            raise ConfigError(f"{where}.by: {table} has no column {column}")
    return windows(versions, spec) if view.spec.kind == "window" else sessions(versions, spec)


def _enrichment(
    spark: SparkSession, view: DerivedView, points: tuple[ReadPoint | None, ...] | None
) -> DataFrame | None:
    spec, lookup = view.spec, view.spec.lookup
    assert lookup is not None
    first, second = points or (None, None)
    stream = stored_history(spark, view.paths[0], first)
    other = stored_history(spark, view.paths[1], second)
    if stream is None or other is None:
        return None
    (stored, key), versions = stream, versions_of(*other)
    where = f"{spec.where}.lookup"
    if sorted(theirs for _, theirs in lookup.on) != sorted(other[1]):
        raise ConfigError(
            f"{where}.on: must pair a column with each of {lookup.table}'s key columns "
            f"({', '.join(other[1])}), so a change finds one row"
        )
    for ours, _ in lookup.on:
        if ours not in stored.columns or ours.startswith("_"):
            raise ConfigError(f"{where}.on: {spec.table} has no column {ours}")
    for name, theirs in lookup.columns:
        if theirs not in versions.columns or theirs.startswith("_"):
            raise ConfigError(f"{where}.columns: {lookup.table} has no column {theirs}")
        if name in stored.columns:
            raise ConfigError(
                f"{where}.columns: {spec.table} has a column {name} already; name the "
                f'lookup\'s another way, e.g. {{"{lookup.table}_{theirs}": "{theirs}"}}'
            )
    return enriched(changes(stored, key), versions, lookup.on, lookup.columns)
