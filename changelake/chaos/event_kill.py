"""The fault "Connect SIGKILLed while an event table streams": inserts flow into a key-less table
captured as an append-only event table; Connect is killed, so Debezium sends again every change
after its last stored offset, and the event table must append none of them twice (two identical
rows one statement inserted both stay: they are two events).

A kill right after an offset flush redelivers nothing; the fault says whether this one did
(changes stamped with a position an earlier record of the topic already had).
"""

from __future__ import annotations

import signal
import threading
from collections import Counter
from dataclasses import dataclass

from changelake import kafka_io, pg
from changelake.capture import connectors
from changelake.capture.caught_up import wait_caught_up
from changelake.capture.connect_api import ConnectApi
from changelake.capture.source import source_of
from changelake.changelog.redelivery import POSITION_HEADER
from changelake.exceptions import ChangelakeError
from changelake.settings import Settings
from changelake.stack import manager, process
from changelake.waiting import wait_until

RATE = 50.0  # inserts per second: a second of unflushed offsets is tens of changes
INSERTS_TIMEOUT_S = 30.0
CAUGHT_UP_S = 120.0


@dataclass(frozen=True)
class EventTable:
    """A key-less table (`what text, n int`, REPLICA IDENTITY FULL) captured as an event table."""

    dsn: str
    table: str  # schema.table
    topic: str
    connector: str  # the one capturing it


class Inserts:
    """Inserts into the event table on a thread of its own; every fifth is a COPY of two
    identical rows (one WAL record: two changes at one LSN, told apart by their count)."""

    def __init__(self, dsn: str, table: str) -> None:
        self.dsn, self.table, self.n = dsn, table, 0
        self.stopping = threading.Event()
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="chaos-events", daemon=True)

    def _run(self) -> None:
        try:
            with pg.connect(self.dsn, autocommit=True) as conn:
                while not self.stopping.wait(1 / RATE):
                    self.n += 1
                    if self.n % 5:
                        conn.execute(f"INSERT INTO {self.table} VALUES ('once', %s)", (self.n,))
                        continue
                    with conn.cursor().copy(f"COPY {self.table} (what, n) FROM STDIN") as copy:
                        copy.write(f"twice\t{self.n}\ntwice\t{self.n}\n")
        except BaseException as exc:  # handed to whoever waits on the inserts
            self.failure = exc

    def wait_for(self, more: float) -> None:
        until = self.n + more

        def done() -> bool:
            if self.failure is not None:
                raise ChangelakeError(f"chaos: inserts into {self.table} failed: {self.failure}")
            return self.n >= until

        if not wait_until(done, INSERTS_TIMEOUT_S, interval_s=0.1):
            raise ChangelakeError(
                f"chaos: {more:.0f} more inserts into {self.table} took over "
                f"{INSERTS_TIMEOUT_S:.0f}s"
            )

    def __enter__(self) -> Inserts:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopping.set()
        self.thread.join()


def redelivered(bootstrap: str, topic: str) -> int:
    """Records of the topic whose stamped position an earlier record had."""
    seen = Counter(
        r.headers[POSITION_HEADER]
        for r in kafka_io.read(bootstrap, topic, raw=True)
        if POSITION_HEADER in r.headers
    )
    return sum(n - 1 for n in seen.values())


@dataclass(frozen=True)
class EventKill:
    inserts: int
    redelivered: int  # changes Debezium sent again after this kill

    def describe(self) -> str:
        again = (
            f"Debezium sent {self.redelivered} of them again"
            if self.redelivered
            else "nothing sent again (the kill followed an offset flush)"
        )
        return (
            f"Kafka Connect: SIGKILL while {self.inserts} inserts streamed to an event table; "
            f"{again}"
        )


def kill_connect_under_events(settings: Settings, events: EventTable) -> EventKill:
    """A second of inserts, SIGKILL Connect, start it again, a second more; then say how many
    changes Debezium sent twice (counted once it has read everything committed)."""
    before = redelivered(settings.kafka_bootstrap, events.topic)
    (svc,) = manager.services(settings, ["connect"])
    with Inserts(events.dsn, events.table) as inserts:
        inserts.wait_for(RATE)
        process.stop(svc.pidfile, signal.SIGKILL, 0)
        manager.up(settings, ["connect"], progress=lambda _: None)
        connectors.wait_all_running(settings)
        inserts.wait_for(RATE)
    # What it sent again is in the topic once its slot confirms everything written so far.
    config = ConnectApi(settings.connect_url).connector_config(events.connector)
    if config is None:
        raise ChangelakeError(f"chaos: connector {events.connector} is gone")
    wait_caught_up(source_of(settings, config), config["slot.name"], timeout_s=CAUGHT_UP_S)
    return EventKill(inserts.n, redelivered(settings.kafka_bootstrap, events.topic) - before)
