"""Seam repair: the rows a restarted Debezium task skipped, re-sent with nobody asking.

A bulk statement (a COPY, an INSERT … SELECT, an UPDATE of many rows) gives many change events
one LSN. A restarted task resumes after the event its stored offset names (`lsn_proc`), and
Debezium 3.7 skips only the events of that LSN it counted as sent (`lsn_events_processed`) when
the count is 2 or more. An offset stored at the *first* event of a shared LSN (count 1), or by
Debezium 3.6 (no count), resumes at the next LSN: the rest of that LSN's events never reach
Kafka. An offset stored at a commit (its `messageType`) resumes cleanly; `lsn_proc` equal to
`lsn_commit` does not say so (a transaction's first event starts where the last commit ended).

So each time a task of a connector the run derives starts (a RUNNING record in Connect's status
topic), this reads the offset it resumed from (the last one Connect stored before that record)
and, when the offset lies inside a transaction with a count of 1 or none, asks the connector to
re-send every row that transaction wrote and no later one changed (`xmin` = its xid; an
incremental snapshot through the signal table, `changelake.capture.resend`). An ordinary one-row
event has count 1 too, and nothing tells it from the first of many without the WAL: a doubt
re-sends that transaction's few rows, applied again harmlessly by the LSN guard.

What it cannot re-send: a row the transaction deleted (a snapshot sends no deletes), rows written
in a subtransaction (their own xid), and event tables (no key to snapshot by); `verify` finds
those. Each start is checked once: the starts checked are kept in the run directory.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from confluent_kafka import KafkaException
from psycopg import sql

from changelake import kafka_io, pg, run_log
from changelake.capture.connect_offsets import StoredOffset, offsets_end, stored_offsets
from changelake.capture.resend import Asked, WrittenBy, send
from changelake.exceptions import RetryableError
from changelake.settings import CONNECT_STATUS_TOPIC, Settings
from changelake.tables import TableRef

CHECK_EVERY_S = 5.0
CHECKED_FILE = "seams-checked.json"
KEEP_CHECKED = 1000  # starts remembered; an older one is long compacted out of the status topic
SEAM_IDS = uuid.UUID("5e3a0c1e-7d1b-4c55-9a59-6b1f0c0ffee5")  # names a seam's signal id
Out = Callable[[str], None]
DsnFor = Callable[[TableRef], str]


@dataclass(frozen=True)
class TaskStart:
    """A connector task started (resumed): Connect wrote RUNNING to its status topic."""

    connector: str
    task: int
    partition: int
    offset: int
    at_ms: int

    @property
    def id(self) -> str:
        return f"{self.connector}/{self.task}@{self.partition}:{self.offset}"


def task_start(connectors: set[str], record: kafka_io.Record) -> TaskStart | None:
    """The start a status record says, if it is a RUNNING task of one of `connectors`."""
    key, value = record.key, record.value
    if not isinstance(key, str) or not isinstance(value, dict) or value.get("state") != "RUNNING":
        return None
    name, _, task = key.removeprefix("status-task-").rpartition("-")
    if not key.startswith("status-task-") or name not in connectors or not task.isdigit():
        return None
    return TaskStart(name, int(task), record.partition, record.offset, record.timestamp_ms or 0)


def seam_xid(stored: StoredOffset) -> int | None:
    """The transaction a task resuming from `stored` may have skipped the rest of, or None."""
    value = stored.value
    processed, committed = value.get("lsn_proc"), value.get("lsn_commit")
    if stored.xid is None or processed is None or value.get("snapshot"):
        return None  # no streamed event yet, or the initial snapshot's own offset
    kind = value.get("messageType")  # Debezium 2.x on; older offsets compare the LSNs
    if kind == "COMMIT" or (kind is None and committed is not None and committed == processed):
        return None  # stored at a commit: the transaction was sent whole
    if stored.events_at_lsn is not None and stored.events_at_lsn >= 2:
        return None  # Debezium 3.7 skips just the events it counted
    return stored.xid


def resumed_from(offsets: Sequence[StoredOffset], start: TaskStart) -> StoredOffset | None:
    """The offset the task read when it started: the connector's last one stored before its
    RUNNING record (a task stores none before it reports running)."""
    before = [
        o
        for o in offsets
        if o.connector == start.connector and o.at_ms is not None and o.at_ms <= start.at_ms
    ]
    return before[-1] if before else None


def written_rows(dsn: str, refs: Sequence[TableRef], xid: int) -> dict[str, int]:
    """Per table, how many of its rows transaction `xid` wrote and no later one changed."""
    counts = {}
    with pg.connect(dsn, autocommit=True) as conn:
        for ref in refs:
            row = conn.execute(
                sql.SQL("SELECT count(*) FROM {} WHERE {}").format(
                    sql.Identifier(ref.schema, ref.table), WrittenBy(ref, xid).condition(1)
                )
            ).fetchone()
            counts[ref.name] = int(row[0]) if row else 0
    return counts


class SeamRepair:
    def __init__(
        self,
        settings: Settings,
        out: Out,
        dsn_for: DsnFor,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bootstrap, self.out, self.dsn_for, self.clock = (
            settings.kafka_bootstrap,
            out,
            dsn_for,
            clock,
        )
        self.checked_file = settings.run_dir / CHECKED_FILE
        self.since: dict[int, int] = {}  # the status topic, read up to here
        self.next_check = 0.0
        self.said_no_topic = False

    def tick(self, refs: Sequence[TableRef]) -> list[Asked]:
        """Every few seconds: check the task starts recorded since the last look."""
        now = self.clock()
        if now < self.next_check:
            return []
        self.next_check = now + CHECK_EVERY_S
        try:
            return self._check_starts(refs)
        except (RetryableError, KafkaException, psycopg.Error) as exc:  # tried on the next tick
            self.out(run_log.warning(f"seam repair: {exc}; trying again"))
            return []

    def _check_starts(self, refs: Sequence[TableRef]) -> list[Asked]:
        marks = kafka_io.watermarks(self.bootstrap, CONNECT_STATUS_TOPIC)
        if not marks and not self.said_no_topic:
            self.said_no_topic = True
            self.out(
                run_log.warning(
                    "seam repair off: Kafka Connect's status topic "
                    f"{CONNECT_STATUS_TOPIC} was not found "
                    "(a Connect of your own: set status.storage.topic to it)"
                )
            )
        connectors = {r.connector for r in refs}
        checked = self._checked()
        starts = [
            s
            for record in kafka_io.read(self.bootstrap, CONNECT_STATUS_TOPIC, self.since)
            if (s := task_start(connectors, record)) is not None and s.id not in checked
        ]
        self.since = {p: high for p, (_, high) in marks.items()}
        if not starts:
            return []
        offsets = stored_offsets(self.bootstrap, {}, tombstones=True)  # a reset too
        asked = []
        for start in starts:
            stored = resumed_from(offsets, start)
            xid = None if stored is None else seam_xid(stored)
            if stored is not None and xid is not None:
                mine = [r for r in refs if r.connector == start.connector]
                found = self._ask(start, stored, xid, mine)
                asked += [found] if found else []
            checked.append(start.id)
            self._save(checked)
        return asked

    def _ask(
        self, start: TaskStart, stored: StoredOffset, xid: int, refs: Sequence[TableRef]
    ) -> Asked | None:
        keyed = [r for r in refs if not r.events and r.signal_table]
        if not keyed:
            return None
        dsn = self.dsn_for(keyed[0])
        counts = written_rows(dsn, keyed, xid)
        wanted = [WrittenBy(r, xid) for r in keyed if counts[r.name]]
        if not wanted:
            return None
        since = offsets_end(self.bootstrap)
        signal_table = str(keyed[0].signal_table)
        signal_id = send(dsn, signal_table, wanted, str(uuid.uuid5(SEAM_IDS, start.id)))
        rows = ", ".join(f"{r.ref.name} {counts[r.ref.name]:,}" for r in wanted)
        self.out(
            run_log.warning(
                f"connector {start.connector}: task {start.task} resumed inside transaction "
                f"{xid}, after event {stored.events_at_lsn or '?'} of LSN {stored.lsn}, where "
                f"Debezium may skip the rest of that LSN: asked it to re-send the rows that "
                f"transaction wrote ({rows}; signal {signal_id})"
            )
        )
        return Asked(start.connector, dsn, signal_table, signal_id, since)

    def _checked(self) -> list[str]:
        try:
            found: Any = json.loads(self.checked_file.read_text())
        except (OSError, ValueError):
            return []
        return [str(s) for s in found] if isinstance(found, list) else []

    def _save(self, checked: list[str]) -> None:
        self.checked_file.parent.mkdir(parents=True, exist_ok=True)
        partial = self.checked_file.with_suffix(".partial")
        partial.write_text(json.dumps(checked[-KEEP_CHECKED:]))
        partial.replace(self.checked_file)
