"""The benchmark's own source: a fresh `bench` database with the shop's schema, seeded, and a
connector of its own (prefix `bench`), so a benchmark never touches the demo shop or its lake."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

from changelake import kafka_io
from changelake.capture import removal
from changelake.capture.connect_api import ConnectApi
from changelake.demo.seed import seed
from changelake.settings import Settings
from changelake.stack.postgres import Postgres

DATABASE = PREFIX = "bench"
CONNECTOR = "bench-postgres"  # each run's connector is this plus the run's time: Connect keeps
# a connector's source offsets after it is deleted, and a new slot cannot resume from them
SLOT = PUBLICATION = "changelake_bench"
TABLES = ("customers", "products", "orders", "order_lines")
# The baseline's connector: the same, but with the stock JsonConverter (schemas inline), as the
# users the baseline stands for run it; its own topics and slot.
STOCK_PREFIX, STOCK_SLOT = "benchstock", "changelake_bench_stock"
STOCK_CONVERTER = {
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "true",
    "value.converter.decimal.format": "NUMERIC",
}


def settings_for_bench(settings: Settings) -> Settings:
    return dataclasses.replace(settings, database=DATABASE, publication=PUBLICATION)


def topics(prefix: str = PREFIX) -> list[str]:
    return [f"{prefix}.public.{t}" for t in TABLES]


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
    left = []
    for prefix in (PREFIX, STOCK_PREFIX):
        left += kafka_io.list_topics(settings.kafka_bootstrap, f"{prefix}.")
        heartbeat = f"__debezium-heartbeat.{prefix}"  # a prefix of "….benchstock" too
        left += [
            t for t in kafka_io.list_topics(settings.kafka_bootstrap, heartbeat) if t == heartbeat
        ]
    kafka_io.delete_topics(settings.kafka_bootstrap, left)
    bench = Postgres(settings_for_bench(settings))
    bench.after_start()  # the same database setup `stack up` gives the shop
    return bench.admin_dsn()


def remove_connectors(
    settings: Settings, say: Callable[[str], None], only: str | None = None
) -> None:
    """Every benchmark connector (or `only` that one), with its replication slot."""
    for name in ConnectApi(settings.connect_url).get("/connectors"):
        if str(name).startswith(CONNECTOR) and only in (None, name):
            removal.delete(settings, str(name), drop_slot=True, progress=say)


def connector_name(run: str, stock: bool = False) -> str:
    return f"{CONNECTOR}-{'stock-' if stock else ''}{run.lower()}"


def connector_file(
    settings: Settings,
    folder: Path,
    name: str,
    stock: bool = False,
    overrides: dict[str, str] | None = None,
) -> Path:
    """The shipped shop connector, pointed at the bench database under its own names; `stock`:
    the baseline's, with the stock converter; `overrides`: settings of its own."""
    doc = json.loads((settings.connectors_dir / "shop-postgres.json").read_text())
    doc["name"] = name
    prefix, config = STOCK_PREFIX if stock else PREFIX, doc["config"]
    if stock:
        for key in [k for k in config if k.startswith("value.converter")]:
            del config[key]
        config.update(STOCK_CONVERTER)
    config.update(
        {
            "database.dbname": DATABASE,
            "topic.prefix": prefix,
            "slot.name": STOCK_SLOT if stock else SLOT,
            "publication.name": PUBLICATION,
            "topic.creation.meta.include": (
                f"{prefix}\\.transaction|__debezium-heartbeat\\.{prefix}"
            ),
            **(overrides or {}),
        }
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


SEED_CHUNK = 100_000  # customers per transaction (~810k rows in all tables)


def seed_in_chunks(dsn: str, customers: int, say: Callable[[str], None]) -> int:
    """The demo seed, SEED_CHUNK customers per transaction: one transaction of millions of
    rows would hold back every logical slot in the cluster (the demo's too) until it
    committed, past `max_slot_wal_keep_size`."""
    rows, left, number, started = 0, customers, 0, time.monotonic()
    while left > 0:
        report = seed(dsn, min(SEED_CHUNK, left), seed=42 + number, progress=lambda _: None)
        rows, left, number = rows + report.rows, left - SEED_CHUNK, number + 1
        seconds = time.monotonic() - started
        say(
            f"  seeded {rows:,} rows ({customers - max(left, 0):,} customers)"
            f" in {seconds:.0f} s ({rows / seconds:,.0f}/s)"
        )
    return rows
