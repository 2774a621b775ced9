"""Which views are derived: `schemas/views.json` in the project (none when it is absent).

    {"views": {"customers_history": {"kind": "history", "table": "customers"}}}

A view's name is how `query` reads it; `table` is a captured table's name (as `query` names it).
Kinds: `history` (SCD type 2: every version of each row, see views/history.py). Every error
names the file and the field.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pipelines import jsonfile
from pipelines.exceptions import ConfigError
from pipelines.settings import Settings

KINDS = ("history",)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class ViewSpec:
    name: str
    kind: str
    table: str
    source: str  # the file that declared it, for messages


def views_config_path(settings: Settings) -> Path:
    return Path(os.environ.get("CHANGELAKE_VIEWS_CONFIG") or settings.config_dir / "views.json")


def load_views(path: Path) -> list[ViewSpec]:
    """The file's views, checked on their own (shape, names, kinds); a file named by
    CHANGELAKE_VIEWS_CONFIG must be there."""
    if not path.exists() and not os.environ.get("CHANGELAKE_VIEWS_CONFIG"):
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
        unknown = sorted(set(spec) - {"kind", "table"})
        if unknown:
            raise ConfigError(f"{where}.{unknown[0]}: unknown field (known: kind, table)")
        kind, table = spec.get("kind"), spec.get("table")
        if kind not in KINDS:
            raise ConfigError(f"{where}.kind: {kind!r} is not a view kind ({', '.join(KINDS)})")
        if not isinstance(table, str) or not table:
            raise ConfigError(f"{where}.table: the captured table it derives from, by name")
        specs.append(ViewSpec(name, kind, table, str(path)))
    return specs


def check_against(specs: Iterable[ViewSpec], tables: dict[str, bool]) -> None:
    """Each view's table is captured and keyed (`tables`: name → has a key, i.e. is not an
    event table), no view is named like a table, and no table has two histories."""
    seen: dict[str, str] = {}
    for spec in specs:
        where = f"{spec.source}: views.{spec.name}"
        if spec.name.lower() in {t.lower() for t in tables}:
            raise ConfigError(f"{where}: a captured table has that name already")
        if spec.name.startswith("_"):
            raise ConfigError(f"{where}: names starting with _ are changelake's (e.g. _errors)")
        if spec.table not in tables:
            raise ConfigError(
                f"{where}.table: no captured table {spec.table}",
                f"captured tables: {', '.join(sorted(tables))}",
            )
        if not tables[spec.table]:
            raise ConfigError(
                f"{where}.table: {spec.table} is an append-only event table: every change is "
                "a row of it already"
            )
        if spec.table in seen:
            raise ConfigError(
                f"{where}.table: {spec.table} has a history already ({seen[spec.table]})"
            )
        seen[spec.table] = spec.name
