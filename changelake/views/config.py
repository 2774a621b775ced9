"""Which views are derived: `schemas/views.json` in the project (none when it is absent).

    {"views": {
        "customers_history": {"kind": "history", "table": "customers"},
        "orders_enriched": {"kind": "enrichment", "table": "orders", "lookup": {
            "table": "customers", "on": {"customer_id": "id"},
            "columns": {"customer_name": "name", "customer_country": "country"}}}}}

A view's name is how `query` reads it; `table` is a captured table's name (as `query` names it).
Kinds: `history` (SCD type 2: every version of each row, see views/history.py), `enrichment`
(every change of `table`, joined with the `lookup` table's row as it was at that change's LSN,
see views/enrichment.py), `aggregate` (views/aggregate_config.py), `window` and `session`
(event time, views/window_config.py) and `interval_join` (views/interval_config.py). Every
error names the file and the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from changelake import jsonfile
from changelake.exceptions import ConfigError
from changelake.settings import Settings
from changelake.views.aggregate_config import FIELDS as AGGREGATE_FIELDS
from changelake.views.aggregate_config import Aggregate, parse_aggregate
from changelake.views.interval_config import FIELDS as INTERVAL_FIELDS
from changelake.views.interval_config import IntervalJoin, parse_interval_join
from changelake.views.window_config import (
    SESSION_FIELDS,
    WINDOW_FIELDS,
    EventTime,
    parse_event_time,
)

KINDS = ("history", "enrichment", "aggregate", "window", "session", "interval_join")
_FIELDS = {
    "history": {"kind", "table"},
    "enrichment": {"kind", "table", "lookup"},
    "aggregate": AGGREGATE_FIELDS,
    "window": WINDOW_FIELDS,
    "session": SESSION_FIELDS,
    "interval_join": INTERVAL_FIELDS,
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Lookup:
    """An enrichment's other side: `table`'s row whose key (`on`'s values) equals the change's
    `on` columns, as it was at the change's LSN; `columns`: (view column, lookup column)."""

    table: str
    on: tuple[tuple[str, str], ...]
    columns: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ViewSpec:
    name: str
    kind: str
    table: str
    source: str  # the file that declared it, for messages
    lookup: Lookup | None = None
    aggregate: Aggregate | None = None
    event_time: EventTime | None = None  # kinds window and session
    interval: IntervalJoin | None = None

    @property
    def where(self) -> str:
        return f"{self.source}: views.{self.name}"

    @property
    def tables(self) -> tuple[str, ...]:
        """The tables whose stored changes it reads, its own first."""
        if self.lookup is not None:
            return (self.table, self.lookup.table)
        if self.aggregate is not None:
            return (self.table, *[j.table for j in self.aggregate.joins])
        return (self.table,)


def views_config_path(settings: Settings) -> Path:
    return settings.views_config_override or settings.config_dir / "views.json"


def project_views(settings: Settings) -> list[ViewSpec]:
    """The project's views (a file named by CHANGELAKE_VIEWS_CONFIG must be there)."""
    return load_views(views_config_path(settings), settings.views_config_override is not None)


def load_views(path: Path, required: bool = False) -> list[ViewSpec]:
    """The file's views, checked on their own (shape, names, kinds); none when there is no
    such file and it is not `required`."""
    if not path.exists() and not required:
        return []
    doc = jsonfile.read(path)
    views = doc.get("views") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or set(doc) - {"views"} or not isinstance(views, dict):
        raise ConfigError(
            f'{path}: must be an object like {{"views": {{"customers_history": '
            '{"kind": "history", "table": "customers"}}}}'
        )
    specs = []
    for name, spec in views.items():
        where = f"{path}: views.{name}"
        if not _NAME.fullmatch(name):
            raise ConfigError(f"{where}: a view's name is letters, digits and _ (a SQL name)")
        if not isinstance(spec, dict):
            raise ConfigError(f'{where}: must be an object like {{"kind": "history", ...}}')
        kind, table = spec.get("kind"), spec.get("table")
        if kind not in KINDS:
            raise ConfigError(f"{where}.kind: {kind!r} is not a view kind ({', '.join(KINDS)})")
        unknown = sorted(set(spec) - _FIELDS[kind])
        if unknown:
            known = ", ".join(sorted(_FIELDS[kind]))
            raise ConfigError(f"{where}.{unknown[0]}: unknown field (a {kind} view has {known})")
        if not isinstance(table, str) or not table:
            raise ConfigError(f"{where}.table: the captured table it derives from, by name")
        lookup = _lookup(f"{where}.lookup", spec.get("lookup")) if kind == "enrichment" else None
        aggregate = parse_aggregate(where, table, spec) if kind == "aggregate" else None
        timed = parse_event_time(where, kind, spec) if kind in ("window", "session") else None
        interval = parse_interval_join(where, spec) if kind == "interval_join" else None
        specs.append(ViewSpec(name, kind, table, str(path), lookup, aggregate, timed, interval))
    return specs


def _lookup(where: str, doc: object) -> Lookup:
    example = '{"table": "customers", "on": {"customer_id": "id"}, "columns": ["name"]}'
    if not isinstance(doc, dict):
        raise ConfigError(f"{where}: must be an object like {example}")
    unknown = sorted(set(doc) - {"table", "on", "columns"})
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown field (known: table, on, columns)")
    table, on, columns = doc.get("table"), doc.get("on"), doc.get("columns")
    if not isinstance(table, str) or not table:
        raise ConfigError(f"{where}.table: the captured table it looks rows up in, by name")
    if not isinstance(on, dict) or not on or not _names(on.items()):
        raise ConfigError(
            f"{where}.on: an object from the view table's columns to the lookup table's key "
            'columns, like {"customer_id": "id"}'
        )
    if isinstance(columns, list) and columns and _names((c, c) for c in columns):
        pairs = tuple((c, c) for c in columns)
    elif isinstance(columns, dict) and columns and _names(columns.items()):
        pairs = tuple(columns.items())
    else:
        raise ConfigError(
            f"{where}.columns: the lookup table's columns the view gets, as a list "
            '(["name"]) or an object from the view\'s names to them ({"customer_name": "name"})'
        )
    return Lookup(table, tuple(on.items()), pairs)


def _names(pairs: Iterable[tuple[object, object]]) -> bool:
    return all(isinstance(a, str) and a and isinstance(b, str) and b for a, b in pairs)


def check_against(specs: Iterable[ViewSpec], tables: dict[str, bool]) -> None:
    """Each view's tables are captured and keyed (`tables`: name → has a key, i.e. is not an
    event table), no view is named like a table, and no table has two histories."""
    seen: dict[str, str] = {}
    for spec in specs:
        where = spec.where
        if spec.name.lower() in {t.lower() for t in tables}:
            raise ConfigError(f"{where}: a captured table has that name already")
        if spec.name.startswith("_"):
            raise ConfigError(f"{where}: names starting with _ are changelake's (e.g. _errors)")
        _keyed(f"{where}.table", spec.table, tables, "every change is a row of it already")
        if spec.lookup is not None:
            _keyed(f"{where}.lookup.table", spec.lookup.table, tables, "it has no row versions")
        for i, join in enumerate(spec.aggregate.joins if spec.aggregate else ()):
            _keyed(f"{where}.joins[{i}].table", join.table, tables, "it has no row versions")
        if spec.kind != "history":
            continue
        if spec.table in seen:
            raise ConfigError(
                f"{where}.table: {spec.table} has a history already ({seen[spec.table]})"
            )
        seen[spec.table] = spec.name


def _keyed(where: str, table: str, tables: dict[str, bool], why_not_events: str) -> None:
    if table not in tables:
        raise ConfigError(
            f"{where}: no captured table {table}", f"captured tables: {', '.join(sorted(tables))}"
        )
    if not tables[table]:
        raise ConfigError(f"{where}: {table} is an append-only event table: {why_not_events}")
