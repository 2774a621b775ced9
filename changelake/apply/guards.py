"""What can vanish under a running pipeline: a table's topic, and its source table.

Both end the changelog the Delta table follows, so the table stops with a message that says what
happened and what to do, instead of idling or silently re-reading a topic created anew.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import psycopg
from confluent_kafka import KafkaException

from changelake import kafka_io, pg
from changelake.exceptions import ChangelakeError
from changelake.tables import TableRef


def topic_problem(
    bootstrap: str, topic: str, applied: Mapping[str, int], topics: set[str] | None = None
) -> str | None:
    """Why `topic` can no longer continue from the offsets the table has applied, or None.
    `topics`, if given, is every topic Kafka has (one metadata call for many tables).

    A topic that ends below what was already applied was deleted and created again (Debezium
    or auto-creation): the changes in between are gone from Kafka. One that starts above the
    next offset to apply lost records nobody applied, to retention (an event table's topic keeps
    a week) or a deletion: Spark's reader would skip them without a word."""
    known = topics if topics is not None else set(kafka_io.list_topics(bootstrap, topic))
    if topic not in known:
        return f"its topic {topic} was deleted from Kafka"
    if not applied:
        return None
    ends = kafka_io.watermarks(bootstrap, topic)
    for partition, offset in sorted(applied.items()):
        low, high = ends.get(int(partition), (0, 0))
        if high < offset:
            return (
                f"its topic {topic} was deleted and created again: partition {partition} ends "
                f"at offset {high:,}, below the {offset:,} already applied"
            )
        if low > offset:
            return (
                f"its topic {topic} lost offsets {offset:,} to {low - 1:,} of partition "
                f"{partition} before they were applied (retention, or records deleted): "
                f"{low - offset:,} records are missing from the lake"
            )
    return None


def topic_hint(table: str) -> str:
    return (
        "the changes Kafka no longer holds are lost to the lake; "
        "the Delta table keeps what it applied. To rebuild it, have Debezium snapshot the table "
        "again (docs/troubleshooting.md: 'When a topic is lost'), then run "
        f"`changelake run --resnapshot {table}`"
    )


def missing_tables(dsn: str, tables: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
    """The (schema, table) pairs that no longer exist in the source database. Raises
    psycopg.OperationalError when Postgres cannot be reached: absence is only ever a positive
    answer from the database, never an outage."""
    wanted = sorted(set(tables))
    if not wanted:
        return set()
    with psycopg.connect(dsn, connect_timeout=5, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT s, t FROM unnest(%s::text[], %s::text[]) AS w(s, t)"
            " WHERE to_regclass(format('%%I.%%I', s, t)) IS NULL",
            ([s for s, _ in wanted], [t for _, t in wanted]),
        ).fetchall()
    return {(str(s), str(t)) for s, t in rows}


DROP_GRACE_S = 120.0  # how long a dropped table waits for its last changes to arrive


def _dropped_message(w: Watched, complete: bool) -> str:
    said = f"its source table {w.schema}.{w.name} was dropped (or renamed); "
    if complete:
        said += "the Delta table keeps every change captured before that. "
    else:
        said += (
            "Debezium had not delivered the changes made before the drop after "
            f"{DROP_GRACE_S:.0f} s "
            f"(see `changelake connectors status`: slot {w.slot}), so the last of them may be "
            "missing from the Delta table. "
        )
    return said + (
        "Remove it from the connector's table.include.list, or re-create it and run "
        f"`changelake run --resnapshot {w.table}`"
    )


@dataclass(frozen=True)
class Watched:
    table: str
    schema: str
    name: str
    topic: str
    slot: str
    dsn: str = field(repr=False)  # its source database, as its connector's user (a password)
    applied: Mapping[str, int]  # partition → the next offset the table will read

    @staticmethod
    def of(ref: TableRef, dsn: str, applied: Mapping[str, int]) -> Watched:
        return Watched(ref.name, ref.schema, ref.table, ref.topic, ref.slot, dsn, dict(applied))


class Watch:
    """Checks the running tables every `every_s` seconds; `due_stops` returns the tables to stop
    and why. Outages (Kafka or Postgres unreachable) decide nothing: the next check will."""

    def __init__(self, bootstrap: str, every_s: float = 10.0) -> None:
        self.bootstrap, self.every_s = bootstrap, every_s
        self.dropped_at: dict[str, tuple[str, float]] = {}  # table → (WAL position, time) seen

    def due_stops(self, running: Iterable[Watched]) -> dict[str, str]:
        """Returns table → message for each table whose changelog has ended."""
        running = list(running)
        stops: dict[str, str] = {}
        try:
            topics = set(kafka_io.list_topics(self.bootstrap))
            for w in running:
                if problem := topic_problem(self.bootstrap, w.topic, w.applied, topics):
                    stops[w.table] = f"{problem}. {topic_hint(w.table)}"
        except (ChangelakeError, KafkaException):  # Kafka away: no verdict on any topic
            pass
        try:
            for w, complete in self._dropped([w for w in running if w.table not in stops]):
                stops[w.table] = _dropped_message(w, complete)
        except psycopg.Error:  # Postgres away: no verdict on its tables
            pass
        return stops

    def _dropped(self, running: list[Watched]) -> list[tuple[Watched, bool]]:
        """Tables gone from their source database whose changelog has ended, each with whether
        it ended complete: Debezium confirmed the WAL written up to when the drop was seen and
        the table applied everything its topic holds; or, after DROP_GRACE_S, not (Debezium
        fails on events of a table dropped before it read them: it can no longer look up the
        key)."""
        done = []
        for dsn in {w.dsn for w in running}:
            here = [w for w in running if w.dsn == dsn]
            gone = missing_tables(dsn, [(w.schema, w.name) for w in here])
            for w in here:
                if (w.schema, w.name) not in gone:
                    self.dropped_at.pop(w.table, None)
                elif self._confirmed_since_drop(w) and self._drained(w):
                    done.append((w, True))
                elif time.monotonic() - self.dropped_at[w.table][1] > DROP_GRACE_S:
                    done.append((w, False))
        return done

    def _confirmed_since_drop(self, w: Watched) -> bool:
        with psycopg.connect(w.dsn, connect_timeout=5, autocommit=True) as conn:
            if w.table not in self.dropped_at:
                self.dropped_at[w.table] = (pg.current_wal_lsn(conn), time.monotonic())
            return pg.slot_confirmed(conn, w.slot, self.dropped_at[w.table][0])

    def _drained(self, w: Watched) -> bool:
        try:
            ends = kafka_io.watermarks(self.bootstrap, w.topic)
        except KafkaException:
            return False
        return all(int(w.applied.get(str(p), 0)) >= high for p, (_, high) in ends.items())
