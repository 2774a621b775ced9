"""`changelake status`: how far each derived table has got, and how far behind it still is.

Per table: the LSN and source commit time its last commit applied (from the commit's own
metadata, so it is exactly what the table holds), how far it is behind the source, in seconds
and changes, dead letters and the pipeline's state; for an indexed table, its index's applied
LSN and document count beside the table's. Per replication slot: the WAL Postgres keeps for
Debezium, and a problem entry once that passes `Settings.slot_lag_warn_bytes`. A table whose
connector captures nothing (not running, or its slot dropped, invalidated, made again, or its
source restored: capture_health, slot_trouble) shows `stalled` with the cause.

Nothing here starts Spark: the Delta tables are read with delta-rs (lake/quick_reads.py), so
status answers in about two seconds whether or not a pipeline runs.

A service that does not answer becomes an entry in `problems` and `None` in the fields it feeds:
status is what people run when something is wrong, so it must not fail with it.
"""

from __future__ import annotations

import os
import time
from typing import Any

from confluent_kafka import KafkaException
from deltalake import DeltaTable

from changelake import exit_codes, kafka_io, tables
from changelake.apply.pipeline_file import (
    PIPELINE_FILE,
    STOPPED_STATES,
    TableState,
    pipeline_state,
)
from changelake.capture.capture_health import Stall, capture_stalls, problem_lines
from changelake.capture.slot_status import slot_warnings, slots_of
from changelake.capture.slot_trouble import slot_troubles
from changelake.exceptions import ChangelakeError, first_line
from changelake.lake import quick_reads
from changelake.lake.commits import CommitMeta
from changelake.lake.errors import errors_path
from changelake.lake.layout import DELETED
from changelake.pg import pg_lsn
from changelake.read.dropped_columns import dropped, source_columns
from changelake.search.client import SearchClient
from changelake.settings import Settings
from changelake.sinks.search import SearchSink
from changelake.tables import TableRef
from changelake.verify.verified import verified
from changelake.views.derived import derived_views
from changelake.views.status import views_report

NOT_RUNNING = "not running"
STALLED = str(TableState.STALLED)
# A running pipeline's table further behind its source than this needs a person (`status` exits
# UNHEALTHY): the machine cannot apply the changes that fast. Under the bench's steps a table
# stays within seconds of its source.
BEHIND_S = 60.0
# Kafka topic → {partition: (low, high) watermarks}; a topic missing here does not exist yet.
Marks = dict[str, dict[int, tuple[int, int]]]


def collect(settings: Settings) -> dict[str, Any]:
    """The whole report as plain JSON-ready data (see print_report for the human view), read
    without Spark: the Delta tables through delta-rs (lake/quick_reads.py)."""
    problems: list[str] = []
    refs = tables.captured(settings)
    pipeline, states = pipeline_state(settings)
    # A running pipeline may have been started for some tables only (`--only`).
    absent = {"state": "not in this run" if pipeline["running"] else NOT_RUNNING, "error": None}
    marks = _marks(settings.kafka_bootstrap, [r.topic for r in refs], problems)
    options = quick_reads.storage_options(settings, os.environ)
    try:
        errors = _error_counts(settings, options)
    except ChangelakeError as exc:
        errors = {}
        problems.append(f"dead letters: {first_line(exc)}")
    client = SearchClient.of(settings, retry_for_s=0)
    checked = verified(settings.run_dir)
    columns = source_columns(settings, refs, problems)
    lake = {r.name: _read_or_said(settings, options, r, marks, columns, problems) for r in refs}
    connector_of = {r.name: r.connector for r in refs}
    stalls = capture_stalls(
        settings.connect_url, settings.kafka_bootstrap, connector_of.values(), problems
    )  # a slot's trouble is the root cause of its connector's failure: it names it instead
    stalls |= slot_troubles(settings, refs, {n: t["applied_lsn"] for n, t in lake.items()})
    problems += problem_lines(stalls, connector_of)
    report_tables = {
        ref.name: {
            **lake[ref.name],
            "index": _index_report(client, ref, problems),
            "errors": errors.get(ref.topic, 0),
            "verified": checked.get(ref.name),
            **with_capture(states.get(ref.name, absent), stalls.get(ref.connector)),
        }
        for ref in refs
    }
    if pipeline["running"]:
        problems += behind_source(report_tables)
    slots = slots_of(settings, refs, problems)
    owners = {r.slot: r.connector for r in refs if r.slot}
    problems += slot_warnings(slots, settings.slot_lag_warn_bytes, owners)
    try:
        views = views_report(derived_views(settings, refs), options)
    except ChangelakeError as exc:
        views = {}
        problems.append(f"views: {first_line(exc)}")
    return {
        "pipeline": pipeline,
        "tables": report_tables,
        "views": views,
        "slots": slots,
        "problems": problems,
    }


# Exit codes of `status` (README, "The command line").
HEALTHY, UNHEALTHY, NOT_RUNNING_CODE = (
    exit_codes.OK,
    exit_codes.NEEDS_A_PERSON,
    exit_codes.NOT_RUNNING,
)


def with_capture(state: dict[str, Any], stall: Stall | None) -> dict[str, Any]:
    """A table's state and error as shown, with its capture: `stalled` (its connector's
    sentence as the error) while nothing captures it, unless the table stopped or failed on its
    own (that error is its more pressing one)."""
    shown = {**state, "capture": "running" if stall is None else STALLED}
    if stall is not None and state["state"] not in STOPPED_STATES:
        shown |= {"state": STALLED, "error": stall.sentence}
    return shown


def behind_source(report_tables: dict[str, dict[str, Any]]) -> list[str]:
    """A problem per table further behind its source than BEHIND_S."""
    found = []
    for name, t in sorted(report_tables.items()):
        lag = t.get("lag_s")
        if lag is None or lag <= BEHIND_S:
            continue
        found.append(
            f"{name}: {lag:.0f}s behind its source ({t['lag_changes']:,} changes waiting), over"
            f" {BEHIND_S:.0f}s: the run's batch lines say where each batch's time goes; a"
            " longer `run --trigger-seconds`, or fewer tables per run, lets it keep up"
        )
    return found


def exit_code(report: dict[str, Any]) -> int:
    """UNHEALTHY when something needs a person: a table stopped or failed, or a problem (a
    service unreachable, a slot holding too much WAL); else HEALTHY while the pipeline runs and
    NOT_RUNNING_CODE when none does."""
    if report["problems"] or _troubled(report["tables"]):
        return UNHEALTHY
    return HEALTHY if report["pipeline"]["running"] else NOT_RUNNING_CODE


def _troubled(states: dict[str, dict[str, Any]]) -> list[str]:
    """Each table that stopped, failed or carries an error, as "name state: error"."""
    return [
        f"{name} {s['state']}" + (f": {s['error']}" if s.get("error") else "")
        for name, s in sorted(states.items())
        if s.get("error") or s["state"] in STOPPED_STATES
    ]


def pipeline_health(settings: Settings) -> tuple[int, str]:
    """`status --pipeline`: the running pipeline's own health, from its state file alone (no
    Spark session, no service calls), for a container healthcheck: the exit code and a line."""
    pipeline, states = pipeline_state(settings)
    if not pipeline["running"]:
        where = settings.run_dir / PIPELINE_FILE
        return NOT_RUNNING_CODE, f"no pipeline runs (no live process named in {where})"
    said = f"pipeline pid {pipeline['pid']}, {len(states)} tables"
    code = exit_code({"pipeline": pipeline, "tables": states, "problems": []})
    if code != HEALTHY:
        return code, f"{said}; " + "; ".join(_troubled(states))
    return code, f"{said}, none stopped or failed"


# --- Delta tables ------------------------------------------------------------------------------


_FIGURES = ("rows", "soft_deleted", "applied_lsn", "applied_lsn_pg", "source_commit_time")
_LAGS = ("lag_records", "lag_s", "lag_changes")


def _read_or_said(
    settings: Settings,
    options: dict[str, str],
    ref: TableRef,
    marks: Marks | None,
    columns: dict[str, set[str]],
    problems: list[str],
) -> dict[str, Any]:
    """The table's report; when its Delta log cannot be read, no figure (a lag counted from
    nothing would be wrong) and the cause in `problems`."""
    try:
        return _table_report(settings, options, ref, marks, columns.get(ref.name))
    except ChangelakeError as exc:
        problems.append(f"{ref.name}: {first_line(exc)}")
        return {"exists": None, **dict.fromkeys(_FIGURES + _LAGS), "dropped_columns": []}


def _table_report(
    settings: Settings,
    options: dict[str, str],
    ref: TableRef,
    marks: Marks | None,
    source: set[str] | None,
) -> dict[str, Any]:
    table = quick_reads.open_table(ref.path(settings.lake), options)
    meta = quick_reads.newest(table)[1] if table is not None else None
    lsn = meta.max_lsn if meta else None
    waiting = _lag(marks, ref.topic, meta)
    since = _waiting_since(settings.kafka_bootstrap, marks, ref.topic, meta) if waiting else None
    return {
        "exists": table is not None,
        **(_row_counts(table, ref.soft_delete) if table else {"rows": None, "soft_deleted": None}),
        "applied_lsn": lsn,
        "applied_lsn_pg": pg_lsn(lsn) if lsn is not None else None,
        "source_commit_time": meta.max_source_ts if meta else None,
        "lag_records": waiting,
        **_lags(waiting, since),
        "dropped_columns": dropped(quick_reads.columns(table), source) if table else [],
    }


def _waiting_since(
    bootstrap: str, marks: Marks | None, topic: str, meta: CommitMeta | None
) -> float | None:
    """When (epoch seconds) the oldest record not applied yet was written to the topic; None
    when nothing waits but a trailing tombstone (a delete's, which applies nothing) or Kafka
    does not answer."""
    if marks is None or topic not in marks:
        return None
    done = meta.offsets if meta else {}
    found = []
    for partition, (low, high) in marks[topic].items():
        first = max(low, min(high, done.get(str(partition), low)))
        if first >= high:
            continue
        try:
            record = kafka_io.fetch_one(bootstrap, topic, partition, first, timeout_s=5)
        except ChangelakeError:  # compacted away meanwhile, or Kafka slow: no figure
            continue
        if record.value is None and first == high - 1:
            continue
        if record.timestamp_ms is not None:
            found.append(record.timestamp_ms / 1000)
    return min(found, default=None)


def _lags(waiting: int | None, since: float | None) -> dict[str, Any]:
    """How far behind its source the table is: the records not applied yet, and the seconds
    since the oldest of them was written (`since`; 0 when none wait)."""
    if waiting is None:
        return {"lag_s": None, "lag_changes": None}
    lag_s = 0.0 if since is None else max(0.0, time.time() - since)
    return {"lag_s": lag_s, "lag_changes": waiting}


def _index_report(
    client: SearchClient, ref: TableRef, problems: list[str]
) -> dict[str, Any] | None:
    """The index's alias, generation, documents and applied LSN (None: the table is not indexed)."""
    if ref.search is None:
        return None
    sink = SearchSink(client, ref.search, ref.topic, lambda _text: None)
    report: dict[str, Any] = {"alias": sink.alias, "index": None, "docs": None}
    report |= {"applied_lsn": None, "applied_lsn_pg": None}
    try:
        indexes = sink.indexes()
        if indexes:
            count = client.request("GET", f"/{sink.alias}/_count")
            report |= {"index": indexes[0], "docs": int(count["count"])}
        state = sink.state() or {}
    except ChangelakeError as exc:
        if not any(p.startswith("OpenSearch") for p in problems):
            problems.append(first_line(exc))
        return report
    lsn = state.get("applied_lsn")
    if lsn is not None:
        report |= {"applied_lsn": int(lsn), "applied_lsn_pg": pg_lsn(int(lsn))}
    return report


def _row_counts(table: DeltaTable, soft_delete: bool) -> dict[str, int | None]:
    """Live rows; a soft-delete table also reports the rows marked deleted (kept, not counted)."""
    if not soft_delete:
        return {"rows": quick_reads.count(table), "soft_deleted": None}
    marked = quick_reads.quoted(DELETED)
    row = quick_reads.one_row(
        table,
        f"coalesce(sum(CASE WHEN {marked} THEN 0 ELSE 1 END), 0) AS live,"
        f" coalesce(sum(CASE WHEN {marked} THEN 1 ELSE 0 END), 0) AS marked",
    )
    return {"rows": int(row["live"]), "soft_deleted": int(row["marked"])}


def _error_counts(settings: Settings, options: dict[str, str]) -> dict[str, int]:
    """Dead letters per source topic (one pass over `_errors`)."""
    table = quick_reads.open_table(errors_path(settings), options)
    if table is None:
        return {}
    counts = quick_reads.rows_of(table, "SELECT topic, count(*) AS n FROM t GROUP BY topic")
    return {str(r["topic"]): int(r["n"]) for r in counts}


# --- Kafka -------------------------------------------------------------------------------------


def _marks(bootstrap: str, topics: list[str], problems: list[str]) -> Marks | None:
    """Watermarks of the captured topics that exist, or None if Kafka does not answer."""
    try:
        existing = set(kafka_io.list_topics(bootstrap))
        return {t: kafka_io.watermarks(bootstrap, t) for t in topics if t in existing}
    except ChangelakeError as exc:  # its message already names Kafka and the address
        problems.append(f"kafka: {first_line(exc)}")
    except KafkaException as exc:
        problems.append(f"kafka: cannot read topic offsets at {bootstrap}: {first_line(exc)}")
    return None


def _lag(marks: Marks | None, topic: str, meta: CommitMeta | None) -> int | None:
    """Records still to apply: per partition, the high watermark minus the next offset to read.

    Before the first commit a partition is read from its low watermark (older offsets are gone).
    Compaction leaves gaps in the offsets, so this counts offsets: an upper bound on records.
    """
    if marks is None or topic not in marks:
        return None
    done = meta.offsets if meta else {}
    return sum(
        high - max(low, min(high, done.get(str(p), low))) for p, (low, high) in marks[topic].items()
    )
