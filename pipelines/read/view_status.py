"""`status` of the views (views.json): for each, its kind, its table, how many changes it has
stored and the newest LSN among them (one aggregation over the stored history; the view's own
window is left to queries)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pipelines.changelog.decode import LSN
from pipelines.pg import pg_lsn
from pipelines.sinks.delta import delta_exists
from pipelines.sinks.history import history_of
from pipelines.tables import TableRef


def views_report(spark: SparkSession, lake: str, refs: list[TableRef]) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for ref in refs:
        if ref.history is None:
            continue
        path = history_of(ref.path(lake))
        entry: dict[str, Any] = {"kind": "history", "table": ref.name, "stored": None}
        entry |= {"applied_lsn": None, "applied_lsn_pg": None}
        if delta_exists(spark, path):
            stored, lsn = spark.read.format("delta").load(path).agg(
                F.count("*"), F.max(LSN)
            ).first() or (0, None)
            entry |= {"stored": int(stored), "applied_lsn": lsn}
            entry["applied_lsn_pg"] = pg_lsn(int(lsn)) if lsn is not None else None
        report[ref.history] = entry
    return report


def view_lines(views: dict[str, Any]) -> list[str]:
    return [
        f"view {name}: {v['kind']} of {v['table']}, "
        + (
            f"{v['stored']:,} changes stored through LSN {v['applied_lsn_pg'] or '-'}"
            if v["stored"] is not None
            else "not started (it starts when `run` prepares its table)"
        )
        for name, v in views.items()
    ]
