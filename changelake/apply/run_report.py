"""What a run says about its tables: a line per batch, a periodic summary and the final report
(its state file is `pipeline_file.py`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from changelake.apply.pipeline_file import TableState
from changelake.apply.run_state import Stream, TableJob
from changelake.apply.snapshot import SnapshotResult
from changelake.tables import TableRef


def lsn_text(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def snapshot_lines(ref: TableRef, result: SnapshotResult, took: float) -> list[str]:
    lines = [
        f"{ref.name}: snapshot {result.rows:,} rows from {result.records:,} records in "
        f"{took:.1f}s ({result.rows / max(took, 1e-9):,.0f} rows/s), up to LSN "
        f"{lsn_text(result.meta.max_lsn)}"
        + (f"; {result.errors} dead letters → _errors" if result.errors else "")
    ]
    if result.unresolved_toast:
        lines.append(
            f"{ref.name}: warning: {result.unresolved_toast} rows had only Debezium's "
            "unchanged-TOAST placeholder in the topic; those values are NULL. Set REPLICA "
            f"IDENTITY FULL on {ref.schema}.{ref.table} so updates carry them."
        )
    return lines


def batch_line(job: TableJob, stats: dict[str, Any]) -> str | None:
    """A batch's line, or None for a batch without records."""
    if not stats.get("records"):
        return None
    extra = f", {stats['errors']} → _errors" if stats.get("errors") else ""
    if stats.get("redelivered"):  # an event table's changes Debezium sent again
        extra += f", {stats['redelivered']:,} sent again (skipped)"
    if job.ref.search is not None:
        extra += f", {stats.get('indexed', 0):,} indexed"
        extra += f" ({stats['stale']:,} stale)" if stats.get("stale") else ""
    seconds = float(stats["seconds"])
    phases = ", ".join(f"{k} {v:.1f}" for k, v in stats.get("phases", {}).items())
    return (
        f"{job.ref.name}: batch {stats['batch']}: {stats['changes']:,} changes from "
        f"{stats['records']:,} records{extra} in {seconds:.1f}s "
        f"({stats['changes'] / max(seconds, 1e-9):,.0f}/s), "
        f"LSN {lsn_text(int(stats['max_lsn']))}"
        + (f", {stats['jobs']} Spark jobs" if stats.get("jobs") else "")
        + f" [{phases}]"
    )


def records_behind(progress: Mapping[str, Any] | None, job: TableJob) -> str:
    """How many records of the table's topic its stream had not read at its last batch."""
    sources = (progress or {}).get("sources") or []
    latest = sources[0].get("latestOffset") if sources else None
    if isinstance(latest, str):
        latest = json.loads(latest)
    ends = (latest or {}).get(job.ref.topic)
    if not ends:
        return "?"
    return str(sum(max(0, int(o) - job.offsets.get(str(p), 0)) for p, o in ends.items()))


def summary_line(job: TableJob, progress: Mapping[str, Any] | None) -> str:
    return (
        f"{job.ref.name}: {job.state}, {job.batches} batches, {job.changes:,} changes, "
        f"{job.errors} errors, {records_behind(progress, job)} records behind"
    )


def report_line(job: TableJob) -> str:
    note = f" ({job.error})" if job.error and job.state == TableState.STOPPED else ""
    if job.state == TableState.WAITING:
        note = f" (no events on {job.ref.topic} yet)"
    return (
        f"{job.ref.name}: {job.state}{note}: {job.batches} batches, {job.changes:,} changes, "
        f"{job.errors} errors"
    )


def summary_lines(jobs: Iterable[TableJob], streams: Mapping[str, Stream]) -> list[str]:
    """Where every table stands, a line each, with its stream's last progress."""
    lines = []
    for job in jobs:
        stream = streams.get(job.ref.connector)
        query = stream.query if stream is not None else None
        lines.append(summary_line(job, query.lastProgress if query else None))
    return lines
