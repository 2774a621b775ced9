"""Connect stopped, gracefully and by SIGKILL, while Debezium streams one bulk transaction over two
tables (a COPY, an INSERT … SELECT, an UPDATE of many rows): nothing is lost (issue 13).

Debezium 3.6 lost the rest of the events sharing the LSN it had stored (66 rows in the issue's
reproduction); this test fails on it. The test's connector acknowledges records one by one, so
the transaction streams for seconds and the stop lands inside it every time: the test asserts
that it did, so it cannot pass by missing the window.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

from pipelines.chaos.bulk_stop import Bulk, stop_connect_inside
from tests.integration.pipeline_fixtures import Pipeline

pytestmark = pytest.mark.stack
ROWS = 2500  # per table and per stop

# One record per produce request, one request at a time: a few thousand records a second instead
# of tens of thousands, so a one-second offset flush lands inside the COPY; and small polls, so a
# graceful stop, which still sends and commits what was polled, overshoots by a few hundred.
SLOW_ACKS = {
    "producer.override.batch.size": "0",
    "producer.override.linger.ms": "0",
    "producer.override.max.in.flight.requests.per.connection": "1",
    "max.batch.size": "100",
    "max.queue.size": "200",
}


def bulk(dsn: str, parent: str, child: str, first: int) -> Bulk:
    ids = range(first, first + ROWS)
    with psycopg.connect(dsn) as conn:
        before = wal_insert_lsn(conn)
        with conn.cursor().copy(f"COPY public.{parent} (id, v, n) FROM STDIN") as copy:
            copy.write("".join(f"{i}\tbulk {i}\t{i}.25\n" for i in ids))
        with conn.cursor().copy(f"COPY public.{child} (id, parent_id, qty) FROM STDIN") as copy:
            copy.write("".join(f"{i}\t{i}\t{i % 7}\n" for i in ids))
        copied = (before, wal_insert_lsn(conn))
        inserted = conn.execute(
            f"INSERT INTO public.{parent} (id, v, n)"
            f" SELECT i, 'selected', i FROM generate_series(%s::int, %s::int) i",
            (first + ROWS, first + ROWS + ROWS // 10 - 1),
        ).rowcount
        updated = conn.execute(
            f"UPDATE public.{parent} SET n = n + 1, v = v || '+' WHERE id >= %s AND id %% 3 = 0",
            (first,),
        ).rowcount
        row = conn.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()
        assert row is not None
    return Bulk(int(row[0]), 2 * ROWS + inserted + updated, copied)


def wal_insert_lsn(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    row = conn.execute("SELECT pg_current_wal_insert_lsn() - '0/0'").fetchone()
    assert row is not None
    return int(str(row[0]))


def test_connect_stopped_inside_a_bulk_transaction_loses_nothing(
    pipeline: Callable[..., Pipeline], unique: str
) -> None:
    parent, child = f"bulk_p_{unique}", f"bulk_c_{unique}"
    p = pipeline(
        [parent, child],
        [
            f"CREATE TABLE public.{parent} (id int PRIMARY KEY, v text, n numeric(12,2))",
            f"CREATE TABLE public.{child} (id int PRIMARY KEY, parent_id int, qty int)",
            f"INSERT INTO public.{parent} VALUES (0, 'seed', 0)",
        ],
        connector=SLOW_ACKS,
    )
    connector = p.prefix.replace("_", "-")
    p.caught_up()
    p.run_once()  # the snapshot: the bulk transactions below then go through apply
    stops = []
    for number, hard in enumerate((False, True)):
        first = 1 + number * 10 * ROWS

        def one(first: int = first) -> Bulk:
            return bulk(p.dsn, parent, child, first)

        stops.append(stop_connect_inside(p.settings, one, hard=hard, connector=connector))
    for stop in stops:
        assert stop.inside, stop.describe()  # else the test proved nothing
    p.run_once()
    assert p.assert_equal(parent, ["id"]) == 1 + 2 * (ROWS + ROWS // 10)
    assert p.assert_equal(child, ["id"]) == 2 * ROWS
