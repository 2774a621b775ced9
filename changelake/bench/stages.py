"""The limits of the stages before Spark, each measured alone on the same WAL.

- Postgres logical decoding: a pgoutput slot created before a load, read afterwards with
  `pg_logical_slot_get_binary_changes`; only counts travel, so the figure is the decoder's.
- Debezium → Kafka: the connector paused while a load writes WAL, then resumed; the rate at
  which its topics grow until it has caught up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psycopg

from changelake import kafka_io, pg
from changelake.bench import source
from changelake.capture.connect_api import ConnectApi, quote
from changelake.settings import Settings

# pgoutput message types that carry a row: Insert, Update, Delete
ROW_MESSAGES = (ord("I"), ord("U"), ord("D"))


@dataclass(frozen=True)
class Rate:
    changes: int
    seconds: float

    @property
    def per_s(self) -> float:
        return self.changes / self.seconds if self.seconds > 0 else 0.0


def create_decoding_slot(dsn: str, slot: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))


def decode(dsn: str, slot: str, publication: str) -> Rate:
    """Decode everything the slot holds (then drop it): the row changes and the seconds taken."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        started = time.monotonic()
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE get_byte(data, 0) = ANY(%s))"
            " FROM pg_logical_slot_get_binary_changes(%s, NULL, NULL,"
            " 'proto_version', '1', 'publication_names', %s)",
            (list(ROW_MESSAGES), slot, publication),
        ).fetchone()
        seconds = time.monotonic() - started
        conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    return Rate(int(row[0]) if row else 0, seconds)


def topic_records(bootstrap: str, topics: Sequence[str]) -> int:
    return sum(
        high - low for t in topics for low, high in kafka_io.watermarks(bootstrap, t).values()
    )


def paused(connect_url: str, connector: str, pause: bool) -> None:
    ConnectApi(connect_url).put(
        f"/connectors/{quote(connector)}/{'pause' if pause else 'resume'}", None
    )


def debezium_catch_up(
    bootstrap: str,
    connect_url: str,
    connector: str,
    topics: Sequence[str],
    caught_up: Callable[[], bool],
    say: Callable[[str], None],
    timeout_s: float = 900.0,
) -> Rate:
    """Resume the paused connector and time its topics' growth until `caught_up()`; the end is
    the last moment they grew (the slot's confirmation trails by an offset flush)."""
    before = topic_records(bootstrap, topics)
    started = time.monotonic()
    paused(connect_url, connector, pause=False)
    count, grew_at, next_say = before, started, started + 5
    while not caught_up():
        now = time.monotonic()
        if now - started > timeout_s:
            raise TimeoutError(f"{connector} did not catch up in {timeout_s:.0f}s")
        if (latest := topic_records(bootstrap, topics)) > count:
            count, grew_at = latest, now
        if now >= next_say:
            say(f"  debezium: {count - before:,} records in {now - started:.0f} s")
            next_say = now + 5
        time.sleep(0.2)
    if (latest := topic_records(bootstrap, topics)) > count:
        count, grew_at = latest, time.monotonic()
    return Rate(count - before, grew_at - started)


def slot_reaches_now(dsn: str, slot: str) -> Callable[[], bool]:
    """A check that the slot has confirmed the WAL position current at this call."""
    with pg.connect(dsn, autocommit=True) as conn:
        target = pg.current_wal_lsn(conn)

    def reached() -> bool:
        with pg.connect(dsn, autocommit=True) as conn:
            return pg.slot_confirmed(conn, slot, target)

    return reached


def caught_up_alone(
    settings: Settings, connector: str, prefix: str, dsn: str, slot: str, say: Callable[[str], None]
) -> Rate:
    """Resume one paused bench connector and time it until its slot reaches the WAL of now."""
    return debezium_catch_up(
        settings.kafka_bootstrap,
        settings.connect_url,
        connector,
        source.topics(prefix),
        slot_reaches_now(dsn, slot),
        say,
    )
