"""`status` of the views (views.json): for each, its kind, an aggregate's rows, and per table
it reads, how many changes that table's history has stored and the newest LSN among them (one
aggregation over each stored history; a history or enrichment itself is left to queries)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from changelake.changelog.decode import LSN
from changelake.lake.layout import delta_exists
from changelake.pg import pg_lsn
from changelake.sinks.history import history_of
from changelake.views.derived import DerivedView


def views_report(spark: SparkSession, views: list[DerivedView]) -> dict[str, Any]:
    report: dict[str, Any] = {}
    stored: dict[str, dict[str, Any]] = {}  # per base path: a table two views read is read once
    for view in views:
        for path in view.paths:
            if path not in stored:
                stored[path] = _stored(spark, path)
        entry: dict[str, Any] = {"kind": view.spec.kind, "table": view.spec.table}
        entry["tables"] = {t: stored[p] for t, p in zip(view.spec.tables, view.paths, strict=True)}
        if view.stored_at:  # an aggregate's own rows
            exists = delta_exists(spark, view.stored_at)
            entry["rows"] = (
                spark.read.format("delta").load(view.stored_at).count() if exists else None
            )
        report[view.name] = entry
    return report


def _stored(spark: SparkSession, base_path: str) -> dict[str, Any]:
    path = history_of(base_path)
    if not delta_exists(spark, path):
        return {"stored": None, "applied_lsn": None, "applied_lsn_pg": None}
    count, lsn = spark.read.format("delta").load(path).agg(F.count("*"), F.max(LSN)).first() or (
        0,
        None,
    )
    return {
        "stored": int(count),
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
