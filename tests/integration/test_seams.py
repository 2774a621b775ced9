"""Seam repair (issue 41): a Debezium task that resumes from an offset stored at the first event
of a LSN many events share (a COPY's page) skips the rest of that LSN; `run` notices the task's
start, reads the offset it resumed from, and has the connector re-send the rows that transaction
wrote, with nobody running anything.

Deterministic: the connector is stopped before the COPY, and its offset is set through Connect's
offsets API to the first event of the COPY's first shared LSN (changelake/chaos/first_event.py),
exactly what a graceful stop committing there stores. The topic then lacks that LSN's events
(shown), and the lake has them."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from changelake import kafka_io, pg
from changelake.chaos.bulk_stop import Bulk
from changelake.chaos.first_event import resume_at_first_event
from tests.integration.pipeline_fixtures import Pipeline

pytestmark = pytest.mark.stack
SEEDED = 10
COPIED = 600  # a few heap pages: a few LSNs, each shared by a page's rows


def test_a_task_resuming_at_the_first_event_of_a_shared_lsn_loses_nothing(
    pipeline: Callable[..., Pipeline], unique: str, bootstrap: str
) -> None:
    t = f"seam_{unique}"
    p = pipeline(
        [t],
        [
            f"CREATE TABLE public.{t} (id int PRIMARY KEY, v text)",
            f"INSERT INTO public.{t} SELECT i, 'seeded' FROM generate_series(1, {SEEDED}) i",
        ],
    )
    p.run_once()
    copied = range(SEEDED + 1, SEEDED + 1 + COPIED)

    def copy() -> Bulk:
        with pg.connect(p.dsn) as conn, conn.cursor() as cur:
            before = pg.wal_insert_lsn(cur)
            with cur.copy(f"COPY public.{t} (id, v) FROM STDIN") as rows:
                rows.write("".join(f"{i}\tcopied {i}\n" for i in copied))
            return Bulk(pg.current_xid(cur), COPIED, (before, pg.wal_insert_lsn(cur)))

    seam = resume_at_first_event(p.settings, p.prefix.replace("_", "-"), copy)
    assert seam.shared >= 2, seam.describe()
    p.caught_up()
    sent = {
        r.key_payload["id"]
        for r in kafka_io.read(bootstrap, f"{p.prefix}.public.{t}")
        if r.payload and r.payload.get("op") == "c"
    }
    skipped = set(copied) - sent
    assert len(skipped) == seam.shared, f"{len(skipped)} skipped; {seam.describe()}"

    run = p.run_once()
    assert f"resumed inside transaction {seam.bulk.xid % 2**32}" in run.stdout, run.stdout
    assert p.assert_equal(t, ["id"]) == SEEDED + COPIED
