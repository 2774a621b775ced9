"""Connect stopped while Debezium streams one bulk transaction (a COPY, an INSERT … SELECT, an
UPDATE of many rows): the fault that lost rows on Debezium 3.6 and never on 3.7.

Those statements give many change events one LSN (a multi-insert WAL record carries every tuple
of a page). Connect stores, with each acknowledged record, the LSN of the last event it processed
(`lsn_proc`); a restart from an offset that stops halfway through one LSN's events used to skip
the rest of them. Debezium 3.7 also stores how many events of that LSN were sent
(`lsn_events_processed`) and skips only those, when there are two or more: an offset stored at
the *first* event of an LSN (count 1) still resumes at the next LSN, skipping the rest
(WalPositionLocator in 3.7.0; see docs/troubleshooting.md). `BulkStop.first_of_lsn` names that case.

So the fault waits until Connect has *stored* an offset inside the bulk transaction (its
periodic flush, every `offset.flush.interval.ms`), then stops Connect: a graceful stop commits
what was acknowledged so far, SIGKILL leaves the last periodic flush; either way the restart
resumes from inside the transaction. The offsets topic says afterwards whether it did.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from changelake.capture import connectors
from changelake.capture.connect_offsets import (
    XID_MODULUS,
    StoredOffset,
    offsets_end,
    stored_offsets,
)
from changelake.settings import Settings
from changelake.stack import manager, process

INSIDE_TIMEOUT_S = 60.0
POLL_S = 0.05  # the window is a second or so: look often
ROOM = 0.6  # a stop counts only in the first 60% of the COPY's WAL range


@dataclass(frozen=True)
class Bulk:
    """One committed bulk transaction, and the WAL range its COPY statements wrote: the LSNs that
    many change events share (`pg_current_wal_insert_lsn()` before and after them, in bytes)."""

    xid: int
    row_changes: int
    copied: tuple[int, int]

    def shares(self, stored: StoredOffset) -> bool:
        """`stored` is an offset inside this transaction's COPY: the rest of the events at its
        LSN were not acknowledged yet (unless it was a page's last tuple, one in ~100)."""
        low, high = self.copied
        return stored.xid == self.xid % XID_MODULUS and low <= stored.lsn < high


@dataclass(frozen=True)
class BulkStop:
    bulk: Bulk
    how: str  # "SIGTERM" or "SIGKILL"
    stored: StoredOffset | None  # what Connect resumes from

    @property
    def inside(self) -> bool:
        """Connect resumes from halfway through one LSN's events: the case that lost rows."""
        return self.stored is not None and self.bulk.shares(self.stored)

    @property
    def first_of_lsn(self) -> bool:
        """It resumes from the first event of an LSN: Debezium 3.7 still skips that LSN's rest."""
        return self.inside and self.stored is not None and self.stored.events_at_lsn == 1

    def describe(self) -> str:
        where = (
            f"resumes inside its COPY at LSN {self.stored.lsn}"
            f" after {self.stored.events_at_lsn or '?'} of its events"
            if self.inside and self.stored
            else "resumes outside its COPY (the stop missed the window)"
        )
        if self.first_of_lsn:
            where += (
                " (the first: Debezium 3.7 skips the rest of that LSN, see docs/troubleshooting.md)"
            )
        return (
            f"Kafka Connect: {self.how} while Debezium streamed a bulk transaction "
            f"(xid {self.bulk.xid}, {self.bulk.row_changes:,} row changes); {where}"
        )


def stop_connect_inside(
    settings: Settings,
    run_bulk: Callable[[], Bulk],
    *,
    hard: bool,
    connector: str | None = None,
    attempts: int = 10,
) -> BulkStop:
    """Run bulk transactions until Connect stores an offset inside one, then stop Connect
    (SIGKILL if `hard`, else a graceful stop), start it again and say where it resumes from.
    `connector` narrows the offsets read to one connector's (others may share the database)."""
    bootstrap = settings.kafka_bootstrap
    (svc,) = manager.services(settings, ["connect"])
    since = offsets_end(bootstrap)
    bulk = run_bulk()
    for attempt in range(attempts):
        if _wait_inside(bootstrap, since, bulk, connector):
            break
        if attempt + 1 < attempts:  # the window was missed: try a fresh transaction
            since = offsets_end(bootstrap)
            bulk = run_bulk()
    sig = signal.SIGKILL if hard else svc.stop_signal
    process.stop(svc.pidfile, sig, 0 if hard else svc.stop_grace_s)
    last = [o for o in stored_offsets(bootstrap, since) if connector in (None, o.connector)]
    manager.up(settings, ["connect"], progress=lambda _: None)
    connectors.wait_all_running(settings)
    return BulkStop(bulk, "SIGKILL" if hard else "SIGTERM", last[-1] if last else None)


def _wait_inside(bootstrap: str, since: dict[int, int], bulk: Bulk, connector: str | None) -> bool:
    """Until Connect stores an offset inside `bulk`'s COPY with room left after it (True), or
    one later: the COPY streamed between two flushes, or too little of it was left (False), or
    the deadline (False)."""
    deadline = time.monotonic() + INSIDE_TIMEOUT_S
    while time.monotonic() < deadline:
        end = offsets_end(bootstrap)  # taken first: a record after it is read again, not lost
        for stored in stored_offsets(bootstrap, since):
            if connector not in (None, stored.connector) or stored.xid is None:
                continue
            if bulk.shares(stored) and stored.events_at_lsn != 1:  # a resume 3.7 counts
                # Room left: a graceful stop still sends and commits a few hundred polled
                # records, and a flush may land before a SIGKILL; near the COPY's end either
                # carries the offset past it.
                return stored.lsn < bulk.copied[0] + ROOM * (bulk.copied[1] - bulk.copied[0])
            if stored.lsn >= bulk.copied[1]:
                return False
        since = end
        time.sleep(POLL_S)
    return False
