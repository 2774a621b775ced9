"""`status` of the views (views.json): for each, its kind, an aggregate's rows, and per table
it reads, how many changes that table's history has stored and the newest LSN among them (one
aggregation over each stored history; a history or enrichment itself is left to queries)."""

from __future__ import annotations

from typing import Any

from changelake.changelog.decode import LSN
from changelake.lake import quick_reads
from changelake.lake.layout import history_of
from changelake.pg import pg_lsn
from changelake.views.derived import DerivedView


def views_report(views: list[DerivedView], options: dict[str, str]) -> dict[str, Any]:
    """Read without Spark (lake/quick_reads.py; `options`: its storage options)."""
    report: dict[str, Any] = {}
    stored: dict[str, dict[str, Any]] = {}  # per base path: a table two views read is read once
    for view in views:
        for path in view.paths:
            if path not in stored:
                stored[path] = _stored(path, options)
        entry: dict[str, Any] = {"kind": view.spec.kind, "table": view.spec.table}
        entry["tables"] = {t: stored[p] for t, p in zip(view.spec.tables, view.paths, strict=True)}
        if view.stored_at:  # an aggregate's own rows
            table = quick_reads.open_table(view.stored_at, options)
            entry["rows"] = quick_reads.count(table) if table else None
        report[view.name] = entry
    return report


def _stored(base_path: str, options: dict[str, str]) -> dict[str, Any]:
    table = quick_reads.open_table(history_of(base_path), options)
    if table is None:
        return {"stored": None, "applied_lsn": None, "applied_lsn_pg": None}
    row = quick_reads.one_row(table, f"count(*) AS n, max({quick_reads.quoted(LSN)}) AS lsn")
    lsn = row["lsn"]
    return {
        "stored": int(row["n"]),
        "applied_lsn": lsn,
        "applied_lsn_pg": pg_lsn(int(lsn)) if lsn is not None else None,
    }


def view_lines(views: dict[str, Any]) -> list[str]:
    def part(table: str, s: dict[str, Any]) -> str:
        if s["stored"] is None:
            return f"{table}: not started (it starts when `run` prepares the table)"
        return f"{table}: {s['stored']:,} changes stored through LSN {s['applied_lsn_pg'] or '-'}"

    def rows(v: dict[str, Any]) -> str:
        if "rows" not in v:
            return ""
        return f", {v['rows']:,} rows" if v["rows"] is not None else ", not computed yet"

    return [
        f"view {name}: {v['kind']} of {v['table']}{rows(v)} ("
        + "; ".join(part(t, s) for t, s in v["tables"].items())
        + ")"
        for name, v in views.items()
    ]
