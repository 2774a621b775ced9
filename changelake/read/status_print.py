"""How `changelake status` shows its report (read/status.py collects it): the pipeline's line,
a row per table with its index, the views, each replication slot, and the problems."""

from __future__ import annotations

import time
from typing import Any

from changelake.capture.slot_status import byte_size
from changelake.read.formats import grid
from changelake.views.status import view_lines

_HEADER = [
    "table",
    "state",
    "rows",
    "applied LSN",
    "source commit time",
    "lag",
    "index LSN",
    "docs",
    "errors",
]
_RIGHT = [False, False, True, False, False, True, False, True, True]


def print_report(report: dict[str, Any]) -> None:
    print(_pipeline_line(report["pipeline"]))
    cells = [_table_cells(name, t) for name, t in report["tables"].items()]
    for line in grid(_HEADER, cells, _RIGHT):
        print(line)
    for name, t in report["tables"].items():
        if t.get("dropped_columns"):
            print(
                f"{name}: columns dropped at the source, kept in the lake with their last "
                f"values: {', '.join(t['dropped_columns'])}"
            )
        if t.get("verified"):
            print(verified_line(name, t["verified"]))
    for line in view_lines(report.get("views", {})):
        print(line)
    for name, slot in report["slots"].items():
        print(_slot_line(name, slot))
    for problem in report["problems"]:
        print(f"problem: {problem}")
    for name, t in report["tables"].items():
        if t.get("error"):
            print(f"{name}: {t['error']}")


def verified_line(name: str, v: dict[str, Any], now: float | None = None) -> str:
    """What the run's continuous verification did for a table: its last full pass, what it
    re-sent, what a re-send cannot mend."""
    now = time.time() if now is None else now
    at = v.get("verified_at")
    line = f"verified {name}: "
    line += (
        f"{_ago(now - float(at))} ago, {_number(v.get('rows'))} rows"
        if at is not None
        else "first pass under way"
    )
    if v.get("resent"):
        line += f"; {_number(v['resent'])} rows re-sent, the last {_ago(now - v['resent_at'])} ago"
    if v.get("unrepaired"):
        line += f"; {_number(v['unrepaired'])} rows a re-send cannot mend (see the run's log)"
    return line


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _pipeline_line(pipeline: dict[str, Any]) -> str:
    if not pipeline["running"]:
        return "pipeline: not running (start it with `changelake run`)"
    return f"pipeline: running, pid {pipeline['pid']}, started {pipeline.get('started') or '?'}"


def _table_cells(name: str, t: dict[str, Any]) -> list[str]:
    rows = _number(t["rows"])
    if t.get("soft_deleted"):
        rows += f" (+{t['soft_deleted']:,} deleted)"
    return [
        name,
        t["state"],
        rows,
        t["applied_lsn_pg"] or "-",
        t["source_commit_time"] or "-",
        _lag(t.get("lag_changes"), t.get("lag_s")),
        *_index_cells(t.get("index")),
        _number(t["errors"]),
    ]


def _index_cells(index: dict[str, Any] | None) -> list[str]:
    if index is None:
        return ["(not indexed)", "-"]
    if index["index"] is None:
        return ["(no index yet)", "-"]
    return [index["applied_lsn_pg"] or "-", _number(index["docs"])]


def _lag(changes: int | None, seconds: float | None) -> str:
    """Changes behind, and seconds: "1,204 (8s)"."""
    if changes is None:
        return "-"
    return f"{changes:,}" + (f" ({seconds:.0f}s)" if seconds is not None else "")


def _number(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _slot_line(name: str, slot: dict[str, Any]) -> str:
    if slot["exists"] is None:
        return f"slot {name}: unknown (Postgres did not answer)"
    if not slot["exists"]:
        return f"slot {name}: does not exist yet (apply the connector: changelake connectors apply)"
    reader = "active" if slot["active"] else "INACTIVE (no connector reads it; WAL piles up)"
    return f"slot {name}: {reader}, {byte_size(slot['slot_lag_bytes'])} of WAL not yet confirmed"
