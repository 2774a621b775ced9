"""An event table holds each change once (issue 41): Connect SIGKILLed while a key-less table
streams resends the changes after its last stored offset, and the table appends none of them
twice, while two identical rows one statement inserted both stay.

The test shows the redelivery happened (a position stamped on two records of the topic), so it
cannot pass by a kill that landed right after an offset flush; it kills again until one did."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Callable

import pytest

from changelake import pg
from changelake.capture import connectors
from changelake.capture.topic_groups import events_group
from changelake.chaos.event_kill import RATE, Inserts, redelivered
from changelake.settings import Settings
from changelake.stack import manager, process
from tests.integration.pipeline_fixtures import Pipeline

pytestmark = [pytest.mark.stack, pytest.mark.chaos]  # a fault: `make chaos` and CI run it
KILLS = 3  # at most: a kill right after an offset flush redelivers nothing


def test_connect_sigkilled_while_an_event_table_streams_appends_each_change_once(
    pipeline: Callable[..., Pipeline], unique: str, bootstrap: str, settings: Settings
) -> None:
    t = f"audit_{unique}"
    template = connectors.load(settings.connectors_dir / "shop-postgres.json")[0]
    assert template is not None
    groups = template.config["topic.creation.groups"]
    p = pipeline(
        [t],
        [
            f"CREATE TABLE public.{t} (what text, n int)",  # no key: an event table
            f"ALTER TABLE public.{t} REPLICA IDENTITY FULL",
            f"INSERT INTO public.{t} VALUES ('seeded', 0)",
        ],
        connector={
            "topic.creation.groups": f"{groups},events",
            **events_group("", [f"public.{t}"]),
            "topic.creation.events.include": rf".*\.public\.{t}",  # whatever the prefix
        },
    )
    p.run_once()
    topic = f"{p.prefix}.public.{t}"
    (svc,) = manager.services(settings, ["connect"])
    with Inserts(p.dsn, f"public.{t}") as inserts:
        for _ in range(KILLS):
            inserts.wait_for(RATE)  # a second of them
            process.stop(svc.pidfile, signal.SIGKILL, 0)
            manager.up(settings, ["connect"], progress=lambda _: None)
            connectors.wait_all_running(settings)
            inserts.wait_for(RATE)
            p.caught_up()
            if redelivered(bootstrap, topic):
                break
    p.caught_up()
    again = redelivered(bootstrap, topic)
    assert again, f"{KILLS} SIGKILLs of Connect redelivered nothing: the test proved nothing"

    run = p.run_once()
    with pg.connect(p.dsn) as conn:
        source = Counter(conn.execute(f"SELECT what, n FROM public.{t}").fetchall())
    lake = Counter(
        (r["what"], r["n"])
        for r in p.spark.read.format("delta").load(p.path(t)).select("what", "n").collect()
    )
    assert lake == source, f"lake - source: {lake - source}; source - lake: {source - lake}"
    assert sum(source.values()) > 3 * RATE
    assert "sent again (skipped)" in run.stdout, run.stdout
