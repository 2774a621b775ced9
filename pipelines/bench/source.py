"""The benchmark's own source: a fresh `bench` database with the shop's schema, seeded, and a
connector of its own (prefix `bench`), so a benchmark never touches the demo shop or its lake."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import psycopg

from pipelines import kafka_io
from pipelines.capture import connectors
from pipelines.capture.connect_api import ConnectApi
from pipelines.settings import Settings
from pipelines.stack.postgres import Postgres

DATABASE = PREFIX = "bench"
CONNECTOR = "bench-postgres"  # each run's connector is this plus the run's time: Connect keeps
# a connector's source offsets after it is deleted, and a new slot cannot resume from them
SLOT = PUBLICATION = "changelake_bench"
TABLES = ("customers", "products", "orders", "order_lines")


def settings_for_bench(settings: Settings) -> Settings:
    return dataclasses.replace(settings, database=DATABASE, publication=PUBLICATION)


def topics() -> list[str]:
    return [f"{PREFIX}.public.{t}" for t in TABLES]


def reset(settings: Settings, say: Callable[[str], None]) -> str:
    """Remove what an earlier benchmark left (connector, slot, topics, database), then create the
    database afresh with the shop schema and Debezium's publication. Returns its DSN."""
    remove_connectors(settings, say)
    with psycopg.connect(Postgres(settings).admin_dsn("postgres"), autocommit=True) as conn:
        conn.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
            " WHERE database = %s AND NOT active",
            (DATABASE,),
        )
        conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}"')
    left = kafka_io.list_topics(settings.kafka_bootstrap, f"{PREFIX}.")
    left += kafka_io.list_topics(settings.kafka_bootstrap, f"__debezium-heartbeat.{PREFIX}")
    kafka_io.delete_topics(settings.kafka_bootstrap, left)
    bench = Postgres(settings_for_bench(settings))
    bench.after_start()  # the same database setup `stack up` gives the shop
    return bench.admin_dsn()


def remove_connectors(settings: Settings, say: Callable[[str], None]) -> None:
    """Every benchmark connector, with its replication slot."""
    for name in ConnectApi(settings.connect_url).get("/connectors"):
        if str(name).startswith(CONNECTOR):
            connectors.delete(settings, str(name), drop_slot=True, progress=say)


def connector_name(run: str) -> str:
    return f"{CONNECTOR}-{run.lower()}"


def connector_file(settings: Settings, folder: Path, name: str) -> Path:
    """The shipped shop connector, pointed at the bench database under its own names."""
    doc = json.loads((settings.connectors_dir / "shop-postgres.json").read_text())
    doc["name"] = name
    doc["config"].update(
        {
            "database.dbname": DATABASE,
            "topic.prefix": PREFIX,
            "slot.name": SLOT,
            "publication.name": PUBLICATION,
            "topic.creation.meta.include": (
                f"{PREFIX}\\.transaction|__debezium-heartbeat\\.{PREFIX}"
            ),
        }
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(doc, indent=2))
    return path
