"""The chaos run's event table: a key-less table in the shop's database, captured as an
append-only event table by a connector of its own (the shop connector's file with its own name,
slot and topic prefix, the table's topic uncompacted), so the fault `kill-connect-events` has an
event table to kill Connect under, and every round's `verify` compares it, as a multiset, with
the source.

It exists for the rounds only: made before them, and its connector, slot, topics and table
removed after them (a connector left registered would trip the next run of the test suite).
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from changelake import kafka_io, pg
from changelake.capture import connectors, removal
from changelake.capture.connect_api import ConnectApi
from changelake.capture.prepare import HEARTBEAT
from changelake.capture.topic_groups import events_group
from changelake.chaos.event_kill import EventTable
from changelake.exceptions import first_line
from changelake.settings import Settings

NAME = "chaos-events"
PREFIX = SLOT = "chaos_events"
TABLE = "public.chaos_events"
TEMPLATE = "shop-postgres.json"


def connector_config(template: dict[str, str]) -> dict[str, str]:
    """The shop connector's settings, reading only the event table and the heartbeat table
    (not the signal table: the shop's re-sends are not its to answer)."""
    groups = [g for g in template.get("topic.creation.groups", "").split(",") if g]
    config = {k: v for k, v in template.items() if k != "signal.data.collection"}
    return {
        **config,
        "topic.prefix": PREFIX,
        "slot.name": SLOT,
        "table.include.list": f"{TABLE},{HEARTBEAT}",
        "topic.creation.groups": ",".join([*groups, "events"]),
        "topic.creation.meta.include": rf"{PREFIX}\.transaction|__debezium-heartbeat\.{PREFIX}",
        **events_group(PREFIX, [TABLE]),
    }


@contextmanager
def event_table(settings: Settings, dsn: str, connectors_dir: Path) -> Iterator[EventTable]:
    """The event table, captured, while the rounds run. `connectors_dir` is made to hold the
    project's connector files and this one's: the chaos run's `run` and `verify` read it
    (CHANGELAKE_CONNECTORS_DIR)."""
    for failed in _remove(settings, dsn):  # what an interrupted chaos run left
        raise failed
    with pg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {TABLE} (what text, n int)")
        conn.execute(f"ALTER TABLE {TABLE} REPLICA IDENTITY FULL")  # an update's old values
    connectors_dir.mkdir(parents=True, exist_ok=True)
    for path in sorted(settings.connectors_dir.glob("*.json")):
        shutil.copy2(path, connectors_dir / path.name)
    template = json.loads((settings.connectors_dir / TEMPLATE).read_text())
    doc = {"name": NAME, "config": connector_config(template["config"])}
    path = connectors_dir / f"{NAME}.json"
    path.write_text(json.dumps(doc, indent=2))
    try:
        connectors.apply(settings, [path], progress=lambda _: None)
        yield EventTable(dsn, TABLE, f"{PREFIX}.{TABLE}", NAME)
    finally:
        for failed in _remove(settings, dsn):  # said, never in place of the rounds' own error
            print(f"chaos: {NAME} not removed: {first_line(failed)}", file=sys.stderr)


def _remove(settings: Settings, dsn: str) -> list[Exception]:
    """The connector (its offsets and slot), topics, table, lake table and checkpoint, each
    step tried whatever the others did: a next chaos run starts from nothing, or its lake would
    hold this one's events. What failed, in order."""
    failed: list[Exception] = []

    def step(do: Callable[[], object]) -> None:
        try:
            do()
        except Exception as exc:  # the next step still runs
            failed.append(exc)

    def connector() -> None:
        if ConnectApi(settings.connect_url).connector_config(NAME) is not None:
            removal.delete(settings, NAME, drop_slot=True, progress=lambda _: None)

    def topics() -> None:
        found = kafka_io.list_topics(settings.kafka_bootstrap, f"{PREFIX}.")
        found += kafka_io.list_topics(settings.kafka_bootstrap, f"__debezium-heartbeat.{PREFIX}")
        kafka_io.delete_topics(settings.kafka_bootstrap, found)

    def table() -> None:
        with pg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {TABLE}")

    for do in (connector, topics, table):
        step(do)
    for folder in (f"{settings.lake}/{PREFIX}", f"{settings.checkpoints}/_connectors/{NAME}"):
        if "://" not in folder:  # the chaos run's lake is local (make chaos)
            shutil.rmtree(folder, ignore_errors=True)
    return failed
