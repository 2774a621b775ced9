"""A slot whose tables are idle while the rest of the database is busy must not hold back WAL:
the connector's heartbeat query gives it a change to confirm every few seconds, so the WAL the
slot retains stays bounded however much the other tables write."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

import psycopg
import pytest

from tests.integration.pipeline_fixtures import Pipeline

pytestmark = pytest.mark.stack
MB = 1 << 20
BUSY_S = 50.0  # several heartbeat intervals (10 s) and standby snapshots (15 s)
WRITE_EVERY_S = 0.1  # 1,000 rows of ~200 bytes each time: a few MB of WAL a second


def wal_position(conn: psycopg.Connection[tuple[object, ...]], slot: str) -> tuple[int, int]:
    """(bytes of WAL the slot retains, bytes written since the cluster began)."""
    row = conn.execute(
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn),"
        " pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')"
        " FROM pg_replication_slots WHERE slot_name = %s",
        (slot,),
    ).fetchone()
    assert row is not None, f"no slot {slot}"
    return int(row[0]), int(row[1])  # type: ignore[call-overload]


def test_an_idle_slot_keeps_advancing_while_other_tables_are_busy(
    pipeline: Callable[..., Pipeline], unique: str
) -> None:
    idle, busy = f"idle_{unique}", f"busy_{unique}"
    p = pipeline([idle], [f"CREATE TABLE public.{idle} (id int PRIMARY KEY)"])
    # Outside the publication: pgoutput sends the connector nothing about these writes.
    p.sql(f"CREATE SCHEMA {busy}")
    p.sql(f"CREATE TABLE {busy}.chaff (id bigserial PRIMARY KEY, payload text)")
    p.caught_up()
    samples: list[tuple[float, int]] = []
    try:
        with psycopg.connect(p.dsn, autocommit=True) as conn:
            _, start = wal_position(conn, p.prefix)
            began = time.monotonic()
            while (elapsed := time.monotonic() - began) < BUSY_S:
                conn.execute(
                    f"INSERT INTO {busy}.chaff (payload)"
                    " SELECT repeat(md5(i::text), 6) FROM generate_series(1, 1000) i"
                )
                retained, _ = wal_position(conn, p.prefix)
                samples.append((elapsed, retained))
                time.sleep(max(0.0, began + len(samples) * WRITE_EVERY_S - time.monotonic()))
            _, end = wal_position(conn, p.prefix)
    finally:
        p.sql(f"DROP SCHEMA {busy} CASCADE")

    written = end - start
    retained = [r for _, r in samples]
    # Each heartbeat the connector confirms lets the slot release WAL: a sharp fall.
    releases = sum(1 for a, b in itertools.pairwise(retained) if b < 0.75 * a)
    report = f"wrote {written / MB:.0f} MB; {releases} releases; retained (s, MB): " + ", ".join(
        f"{t:.0f}:{r / MB:.0f}" for t, r in samples[:: max(1, len(samples) // 20)]
    )
    assert written >= 64 * MB, report  # enough WAL for holding it back to show
    # Without heartbeats the slot would retain everything written since the test began, growing
    # without a single fall.
    assert releases >= 2, report
    assert max(retained) < 0.7 * written, report
