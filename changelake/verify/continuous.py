"""Continuous verification: a streaming run compares each table's source rows with its lake rows
in the background, one key range at a time, and has Debezium re-send what differs, with nobody
running `verify`.

Each pass reads the table's lake rows once, at its start, and keeps them (`Progress.copy`): a
step compares one source range with that copy, so it costs a read of the range from Postgres
and a filter of rows held in memory, not a read of the whole table's files
(the files hold every key, so a range's read cannot skip any), which took a busy bench machine
half a minute per step and held its cores from the stream's batches meanwhile.

The source moves while it is compared, and the copy grows older over the pass, so a first
difference is only a suspect: the range is compared again, against the next pass's copy, then
the source, that copy read once the pipeline had applied every change committed before the first
look (the replication slot has confirmed the WAL position read with it, and the table's stream
has read its topic to the end offsets it had then), and no sooner than RECHECK_S after it. A key
still differing whose source row is the very same row version (the same `xmin`, or absent both
times) is a real difference: its last change committed before the first look, so the lake
should hold it by now. Those keys
are re-sent through the connector's signal table (the same incremental snapshot as `verify
--repair`); keys the source no longer has cannot be re-sent (a snapshot sends no delete) and are
reported. A key re-sent once and found again at the same row version is not re-sent in a loop:
it is reported once as not repairable by a re-send.

Its pace is a share of the time (`share`): after a step that took t seconds, it rests
t * (1 - share) / share, so it takes at most that share of one core's time, less on a busy
machine (a step's wall time includes its waits). A table is first compared once its stream has
applied what its topic held when verification first looked (`FirstCatchUp`): a run catching up
after a restart or a backlog has the machine to itself until then. Each table's last full pass,
and what it re-sent, are kept in `verified.json` in the run directory, which `status` shows.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from pyspark.sql import DataFrame, SparkSession

from changelake import kafka_io, run_log
from changelake.capture.resend import Request, send
from changelake.exceptions import first_line
from changelake.lake.table import read_table
from changelake.settings import Settings
from changelake.spark import kept, release
from changelake.tables import TableRef, source_of_table
from changelake.verify.command import (
    captured_columns,
    comparable,
    source_columns,
    table_sql,
)
from changelake.verify.diff import as_source, row_hash
from changelake.verify.ranges import (
    TEXT_TYPES,
    Key,
    KeyColumn,
    KeyRange,
    next_boundary_query,
)
from changelake.verify.sides import (
    Comparable,
    Rows,
    connect,
    lake_frame,
    lake_range,
    source_range,
)
from changelake.verify.verified import pass_line, record, work_line

# Source rows per step: what each side holds in Python at once (the lake's copy is in Spark).
RANGE_ROWS = 20_000
POOL = "verify"  # its Spark scheduler pool, see fairscheduler.xml
IDLE_S = 5.0  # how long it rests when no table can be compared
RECHECK_S = 10.0  # a range that differed is compared again this long after, at the soonest
Out = Callable[[str], None]


@dataclass
class Suspect:
    part: KeyRange
    versions: dict[Key, str | None]  # each differing key's source row version (None: absent)
    seen: float  # time.monotonic of the first look: a copy read after it can settle it
    lsn: str  # the source's WAL position at the first look
    ends: dict[str, int] | None = None  # the topic's end offsets once the slot confirmed `lsn`


@dataclass(frozen=True)
class Side:
    """What a step needs to read one table on both sides."""

    ref: TableRef
    key: list[KeyColumn]
    how: Comparable
    columns: list[str] | None
    frame: DataFrame  # the lake's live rows (lake_frame), as a pass's copy holds them
    read_at: float  # time.monotonic when the copy was read


@dataclass
class Progress:
    copy: Side | None = None  # this pass's copy of the lake (None: the pass has not begun)
    cursor: Key | None = None  # the next range's lower bound (None: a pass starts)
    rows: int = 0  # compared in this pass
    started: float = field(default_factory=time.monotonic)  # this pass
    busy: float = 0.0  # seconds of steps in this pass
    suspects: list[Suspect] = field(default_factory=list)
    resent: dict[Key, str] = field(default_factory=dict)  # key → the version re-sent


class FirstCatchUp:
    """Whether a table's stream has once applied everything its topic held when first asked
    about it. `ends(topic)`: the topic's end offsets by partition; `applied(table)`: the next
    offset its stream reads, by partition."""

    def __init__(
        self, ends: Callable[[str], dict[str, int]], applied: Callable[[str], dict[str, int]]
    ):
        self.ends, self.applied = ends, applied
        self.targets: dict[str, dict[str, int]] = {}
        self.done: set[str] = set()

    def __call__(self, ref: TableRef) -> bool:
        if ref.name in self.done:
            return True
        target = self.targets.get(ref.name)
        if target is None:
            target = self.targets[ref.name] = self.ends(ref.topic)
        applied = self.applied(ref.name)
        if all(applied.get(p, 0) >= end for p, end in target.items()):
            self.done.add(ref.name)
        return ref.name in self.done


class ContinuousVerifier:
    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        share: float,
        tables: Callable[[], list[TableRef]],
        applied: Callable[[str], dict[str, int]],
        out: Out,
    ):
        """`tables()`: the tables to compare now (those the run streams); `applied(table)`: per
        partition, the next offset its stream reads."""
        self.spark, self.settings, self.share = spark, settings, share
        self.tables, self.applied, self.out = tables, applied, out
        self.progress: dict[str, Progress] = {}
        self.caught_up = FirstCatchUp(self._ends, applied)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="changelake-verify", daemon=True)
        self._said: set[str] = set()
        self.steps, self.rows, self.work_s = 0, 0, 0.0  # over the run, passes complete or not
        self._step_started: float | None = None  # the step running now (monotonic)

    def start(self) -> None:
        if self.share > 0:
            self.thread.start()

    def stop(self, wait_s: float) -> None:
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(wait_s)
        steps, work_s, running = self.steps, self.work_s, self._step_started
        if running is not None:  # a step left behind counts the time it has worked so far
            steps, work_s = steps + 1, work_s + time.monotonic() - running
        if steps:
            self.out(work_line(steps, self.rows, work_s))

    def _loop(self) -> None:
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", POOL)
        turn = 0
        while not self.stopping.is_set():
            refs = [r for r in self.tables() if not r.events and self._caught_up(r)]
            self._forget({r.name for r in refs})
            if not refs:
                self.stopping.wait(IDLE_S)
                continue
            ref = refs[turn % len(refs)]
            turn += 1
            worked = self.work_s
            try:
                self.step(ref)
            except Exception as exc:  # a table being rebuilt, the source unreachable: next turn
                if self.stopping.is_set():
                    return  # the run's Spark stopping under a step
                self._say_once(ref.name, f"{ref.name}: not verified now: {first_line(exc)}")
            busy = self.work_s - worked  # the step's own time (it counts it, failing or not)
            self.stopping.wait(max(0.5, busy * (1 - self.share) / self.share))

    def _forget(self, kept: set[str]) -> None:
        """Free the copies of tables no longer compared (stopped, removed, not caught up)."""
        for name in [n for n in self.progress if n not in kept]:
            copy = self.progress[name].copy
            if copy is not None:
                release(copy.frame)
            self.progress[name].copy = None

    def _ends(self, topic: str) -> dict[str, int]:
        watermarks = kafka_io.watermarks(self.settings.kafka_bootstrap, topic)
        return {str(p): high for p, (_, high) in watermarks.items()}

    def _caught_up(self, ref: TableRef) -> bool:
        try:
            return self.caught_up(ref)
        except Exception:  # Kafka away for a moment: asked again next turn
            return False

    def step(self, ref: TableRef) -> None:
        """Compare one range of `ref`: a suspect's, when one is due, else the next one."""
        progress = self.progress.setdefault(ref.name, Progress())
        started, rows = time.monotonic(), progress.rows
        self._step_started = started
        try:
            complete = self._step(ref, progress)
        finally:
            self._step_started = None
            took = time.monotonic() - started
            progress.busy += took
            self.steps, self.work_s = self.steps + 1, self.work_s + took
            self.rows += progress.rows - rows
        if complete:
            record(self.settings.run_dir, ref.name, verified_at=time.time(), rows=progress.rows)
            took = time.monotonic() - progress.started
            self.out(pass_line(ref.name, progress.rows, took, progress.busy))
            if progress.copy is not None:
                release(progress.copy.frame)
            self.progress[ref.name] = Progress(suspects=progress.suspects, resent=progress.resent)

    def _step(self, ref: TableRef, progress: Progress) -> bool:
        """True when the step completed a pass over the table."""
        dsn = source_of_table(self.settings, ref).dsn()
        with connect(dsn) as conn:
            side = progress.copy
            if side is None:  # a pass begins: its copy of the lake, once suspects can settle
                if all(self._applied(conn, ref, s) for s in progress.suspects):
                    progress.copy = self._side(conn, ref)
                return False
            due = next((s for s in progress.suspects if s.seen < side.read_at), None)
            if due is not None:
                progress.suspects.remove(due)
                self._recheck(conn, dsn, side, progress, due)
                return False
            now = time.monotonic()
            query, params = next_boundary_query(
                table_sql(ref), side.key, progress.cursor, RANGE_ROWS
            )
            found = conn.execute(query, params).fetchone()
            part = KeyRange(progress.cursor, tuple(found) if found else None)
            source, versions = _source(conn, side, part)
            lsn = str(_one(conn, "SELECT pg_current_wal_lsn()::text"))
            lake = lake_range(side.frame, side.key, part, side.how)
            conn.rollback()
        suspects = _differing(source, lake)
        # One suspect per range: a table that lags for passes on end must not pile them up.
        if suspects and all(s.part != part for s in progress.suspects):
            wanted = {k: versions.get(k) for k in suspects}
            progress.suspects.append(Suspect(part, wanted, now, lsn))
        progress.rows += len(source)
        progress.cursor = part.upper
        return part.upper is None

    def _applied(self, conn: psycopg.Connection[Any], ref: TableRef, suspect: Suspect) -> bool:
        """Whether the table has applied every change committed before `suspect`'s first look."""
        if suspect.seen + RECHECK_S > time.monotonic():
            return False
        if suspect.ends is None:
            confirmed = _one(
                conn,
                "SELECT confirmed_flush_lsn >= %s::pg_lsn FROM pg_replication_slots"
                " WHERE slot_name = %s",
                (suspect.lsn, ref.slot),
            )
            conn.rollback()
            if not confirmed:
                return False
            suspect.ends = self._ends(ref.topic)
        applied = self.applied(ref.name)
        return all(applied.get(p, 0) >= end for p, end in suspect.ends.items())

    def _side(self, conn: psycopg.Connection[Any], ref: TableRef) -> Side | None:
        """The pass's copy of the table's live lake rows, read now (None: no table to read)."""
        from changelake.lake.layout import delta_exists

        read_at = time.monotonic()  # before the read pins the table's versions
        path = ref.path(self.settings.lake)
        if not delta_exists(self.spark, path):
            return None
        read = read_table(self.spark, path, ref.soft_delete)
        if read.meta is None or not read.meta.key:
            return None
        types = source_columns(conn, ref)
        key = [KeyColumn(k, types.get(k, "") in TEXT_TYPES) for k in read.meta.key]
        how = comparable(types, read.rows)
        # One read of the table, here, by one task at a time: Spark's scheduler never takes a
        # running task's core back, so a read spread over both cores would hold the stream's
        # batches behind it until one of its tasks ended.
        frame = kept(lake_frame(read.rows, ref.soft_delete).coalesce(1))
        return Side(ref, key, how, captured_columns(types, ref), frame, read_at)

    def _recheck(
        self,
        conn: psycopg.Connection[Any],
        dsn: str,
        side: Side,
        progress: Progress,
        suspect: Suspect,
    ) -> None:
        lake = lake_range(side.frame, side.key, suspect.part, side.how)  # read before the source
        source, versions = _source(conn, side, suspect.part)
        conn.rollback()
        still = _differing(source, lake)
        real = [k for k, v in suspect.versions.items() if k in still and versions.get(k) == v]
        if not real:
            return
        ref = side.ref
        extra = [k for k in real if k not in source]
        again = [k for k in real if k in source and progress.resent.get(k) == versions[k]]
        resend = [k for k in real if k in source and k not in again]
        if extra or again:
            record(self.settings.run_dir, ref.name, unrepaired=len(extra) + len(again))
            self.out(
                run_log.warning(
                    f"{ref.name}: verification found {len(extra):,} rows the source no longer "
                    f"has and {len(again):,} still different after a re-send (e.g. "
                    f"{_sample(extra + again)}): a re-send cannot mend them; `changelake "
                    f"run --resnapshot {ref.name}` rebuilds the table"
                )
            )
        if not resend:
            return
        if not ref.signal_table:
            self._say_once(
                f"{ref.name}/signal",
                run_log.warning(
                    f"{ref.name}: verification found {len(resend):,} rows the lake lacks or "
                    f"holds otherwise, and {ref.connector} has no signal table to re-send them"
                ),
            )
            return
        signal_id = send(dsn, ref.signal_table, [Request(ref, side.key, resend)])
        for k in resend:
            progress.resent[k] = versions[k] or ""
        record(self.settings.run_dir, ref.name, resent=len(resend))
        self.out(
            f"{ref.name}: verification found {len(resend):,} rows the lake lacks or holds "
            f"otherwise (e.g. {_sample(resend)}); asked {ref.connector} to re-send them "
            f"(signal {signal_id})"
        )

    def _say_once(self, topic: str, line: str) -> None:
        if topic not in self._said:
            self._said.add(topic)
            self.out(line)


def _source(
    conn: psycopg.Connection[Any], side: Side, part: KeyRange
) -> tuple[Rows, dict[Key, str]]:
    """The range's source rows (comparable) and each row's version, read in one snapshot."""
    versions: dict[Key, str] = {}
    rows = source_range(conn, table_sql(side.ref), side.key, part, side.columns, versions)
    return {k: side.how.row(r) for k, r in rows.items()}, versions


def _one(conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...] = ()) -> Any:
    row = conn.execute(query, params).fetchone()
    return row[0] if row else None


def _differing(source: Rows, lake: Rows) -> set[Key]:
    """Keys missing from, extra in, or held otherwise by the lake. Only the source's columns are
    compared: a column dropped at the source keeps its last values in the lake, by design."""
    keys = source.keys() ^ lake.keys()
    for k in source.keys() & lake.keys():
        row = source[k]
        if row_hash(row) != row_hash(as_source(row, lake[k])):
            keys.add(k)
    return set(keys)


def _sample(keys: list[Key], count: int = 3) -> str:
    shown = [str(k[0]) if len(k) == 1 else str(k) for k in keys[:count]]
    return ", ".join(shown) + (", …" if len(keys) > count else "")
