"""Waiting until Debezium has read everything committed so far: its slot has confirmed the WAL
position the server had reached when the wait began.

A slot confirms a position only when the connector has a change of its own database to confirm.
On a quiet captured database whose server writes WAL elsewhere (other databases, or the server's
own housekeeping), that is the connector's next heartbeat write, up to `heartbeat.interval.ms`
away, or never without `heartbeat.action.query`. So the wait runs the connector's heartbeat query
itself, as the connector's user, when the slot has not caught up within a moment: a change past
the target that Debezium confirms once it has read everything before it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import psycopg

from changelake import pg
from changelake.capture.source import Source
from changelake.exceptions import ChangelakeError

NUDGE_AFTER_S = 1.0  # a busy connector confirms within this on its own
NUDGE_EVERY_S = 5.0


def wait_caught_up(
    source: Source, slot: str, timeout_s: float = 120.0, say: Callable[[str], None] | None = None
) -> None:
    """Until slot `slot` has confirmed every WAL position written before this call."""
    with pg.connect(source.dsn(), autocommit=True) as conn:
        target = pg.current_wal_lsn(conn)
        if say:
            say(f"waiting until Debezium has read everything committed so far (slot {slot})")
        started = time.monotonic()
        next_nudge = NUDGE_AFTER_S
        while not pg.slot_confirmed(conn, slot, target):
            waited = time.monotonic() - started
            if waited > timeout_s:
                raise ChangelakeError(*_stuck(conn, source, slot, target, timeout_s))
            if source.heartbeat_query and waited > next_nudge:
                # No write access after all: the connector's own heartbeats still come.
                with contextlib.suppress(psycopg.Error):
                    conn.execute(source.heartbeat_query.encode())
                next_nudge = waited + NUDGE_EVERY_S
            time.sleep(0.2)


def _stuck(
    conn: psycopg.Connection[tuple[object, ...]],
    source: Source,
    slot: str,
    target: str,
    timeout_s: float,
) -> tuple[str, str]:
    row = conn.execute(
        "SELECT confirmed_flush_lsn::text, active FROM pg_replication_slots WHERE slot_name = %s",
        (slot,),
    ).fetchone()
    if row is None:
        said = f"replication slot {slot} does not exist in {source.where()}"
    else:
        said = (
            f"replication slot {slot} has confirmed {row[0]}, not yet {target}, after "
            f"{timeout_s:.0f}s ({'read by a connector' if row[1] else 'no connector reads it'})"
        )
    hint = "see `changelake connectors status` and logs/connect.log"
    if not source.heartbeat_query:
        hint = (
            "its connector has no heartbeat.action.query: on a quiet database the slot only "
            "confirms when a captured table changes (`changelake connectors init` sets one up); "
            + hint
        )
    return said, hint
