"""Another database than the demo shop, in a project of its own, with the traps a real one holds:
prepared by `changelake connectors init`, captured, derived by `run` and proved equal to the
source by `verify`, row by row; a composite key, a table named like one of the shop's, a key-less
table keyed by the columns given, one captured as an append-only event table, a partitioned table
(published through its root, rows moving between partitions), a generated column (left out),
numerics holding NaN and ±Infinity (in a keyed and in an event table), money, a row over 1 MB,
and a column added with a default and one renamed after the snapshot. On the real Postgres,
Connect, Kafka and Spark."""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest

from changelake import kafka_io
from changelake.capture import removal
from changelake.capture.caught_up import wait_caught_up
from changelake.capture.source import source_of
from changelake.exceptions import ChangelakeError
from changelake.settings import Settings
from tests.support import changelake, changelake_here, scratch_database

pytestmark = pytest.mark.stack

TABLES = [
    "CREATE SCHEMA inv",
    "CREATE TABLE inv.stock (site int, sku text, qty int,"
    " qty2 int GENERATED ALWAYS AS (qty * 2) STORED, PRIMARY KEY (site, sku))",
    "CREATE TABLE public.orders (id bigint PRIMARY KEY, note text)",  # the shop has one too
    "CREATE TABLE inv.events (at timestamptz NOT NULL, site int NOT NULL, what text)",
    "CREATE TABLE inv.audit (at timestamptz NOT NULL, what text, amount numeric(9, 2))",
    "CREATE TABLE inv.ledger (id int PRIMARY KEY, amount numeric(9, 2) NOT NULL, ratio numeric,"
    " cash money, doc text)",
    "INSERT INTO inv.ledger VALUES (1, 'NaN', 'Infinity', '12.50', 'short'),"
    " (2, 1.50, 1.50, '-3', NULL)",
    "CREATE TABLE inv.readings (site int, day date, value int, PRIMARY KEY (site, day))"
    " PARTITION BY RANGE (day)",
    "CREATE TABLE inv.readings_2025 PARTITION OF inv.readings"
    " FOR VALUES FROM ('2025-01-01') TO ('2026-01-01')",
    "CREATE TABLE inv.readings_2026 PARTITION OF inv.readings"
    " FOR VALUES FROM ('2026-01-01') TO ('2027-01-01')",
    "INSERT INTO inv.readings VALUES (1, '2025-06-01', 10), (1, '2026-06-01', 20)",
    "INSERT INTO inv.stock VALUES (1, 'a', 5), (2, 'a', 7)",
    "INSERT INTO public.orders VALUES (1, 'first')",
    "INSERT INTO inv.events VALUES ('2026-01-01T00:00:00Z', 1, 'opened')",
    "INSERT INTO inv.audit VALUES ('2026-01-01T00:00:00Z', 'login', 1.50)",
]


def pl_events(path: Path) -> list[tuple[str, str]]:
    """An event table's (op, what) in its order, read as any Delta reader does."""
    from deltalake import DeltaTable

    rows = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    rows.sort(key=lambda r: (r["_kafka_partition"], r["_kafka_offset"]))
    return [(r["_cdc_op"], r["what"]) for r in rows]


def write_elsewhere(admin_dsn: str, unique: str) -> None:
    """A transaction in another database (the shop's): WAL the captured one's slot skips."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE changelake.elsewhere_{unique} AS SELECT generate_series(1, 9)")
        conn.execute(f"DROP TABLE changelake.elsewhere_{unique}")


@pytest.fixture
def other_db(admin_dsn: str, unique: str) -> Iterator[str]:
    """A database of the test's own with its own schema; dropped afterwards, slot included."""
    with scratch_database(admin_dsn, f"own_{unique}") as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for statement in TABLES:
                conn.execute(statement)
        yield dsn


def test_a_database_prepared_by_init_is_captured_derived_and_verified(
    other_db: str, admin_dsn: str, settings: Settings, tmp_path: Path, unique: str
) -> None:
    project = tmp_path / "project"
    env = {
        **os.environ,
        "CHANGELAKE_PROJECT": str(project),
        "CHANGELAKE_LAKE": str(tmp_path / "lake"),
        "CHANGELAKE_CHECKPOINTS": str(tmp_path / "checkpoints"),
    }
    name, output = f"own-{unique}", project / "connectors" / f"own-{unique}.json"
    args = ["connectors", "init", name, "--admin-dsn", other_db]
    tables = ["--tables", "inv.stock,public.orders,inv.events,inv.audit,inv.readings,inv.ledger"]
    # A missing table is refused before anything changes.
    refused = changelake(*args, "--tables", "inv.stock,inv.nope", check=False, env=env)
    assert refused.returncode == 1
    assert "--tables: inv.nope: no such table" in refused.stderr
    assert not output.exists()
    with psycopg.connect(other_db) as conn:
        assert conn.execute("SELECT to_regclass('changelake.heartbeat')").fetchone() == (None,)

    big = "".join(random.Random(42).choices("abcdefghijklmnopqrstuvwxyz0123456789", k=1_200_000))
    first = changelake(*args, *tables, "--key", "inv.events:at,site", env=env).stdout
    assert f"created publication changelake_own_{unique}" in first
    assert "partitioned, published through their root: inv.readings" in first
    assert "inv.stock: left out its generated column(s) qty2" in first
    assert "inv.audit: no primary key and no --key: captured as an append-only event" in first
    again = changelake(*args, *tables, "--key", "inv.events:at,site", env=env).stdout
    assert f"publication changelake_own_{unique} exists: has every table already" in again
    doc = json.loads(output.read_text())  # the project's connectors/, by default
    config: dict[str, Any] = doc["config"]
    prefix = f"own_{unique}"
    assert (doc["name"], config["topic.prefix"], config["slot.name"]) == (name, prefix, prefix)
    assert config["database.dbname"] == other_db.split("dbname=")[-1].split()[0]
    assert config["message.key.columns"] == "inv.events:at,site"
    # Postgres 15 replicates no generated column: captured, it would be NULL once changed.
    assert config["column.exclude.list"] == r"inv\.stock\.qty2"
    assert config["topic.creation.groups"] == "meta,events"
    assert config["topic.creation.events.include"] == rf"own_{unique}\.inv\.audit"
    assert config["topic.creation.events.cleanup.policy"] == "delete"

    # Its own heartbeats an hour apart: only the waits' own heartbeat writes confirm below.
    output.write_text(json.dumps({**doc, "config": {**config, "heartbeat.interval.ms": "3600000"}}))
    try:
        changelake("connectors", "apply", env=env)  # the project's files
        changelake_here("run", "--once", env=env)  # the snapshot
        with psycopg.connect(other_db, autocommit=True) as conn:
            conn.execute("INSERT INTO inv.events VALUES ('2026-01-01T00:01:00Z', 2, 'sold')")
            conn.execute("UPDATE inv.events SET what = 'closed' WHERE site = 1")
            conn.execute("UPDATE inv.stock SET qty = qty - 1 WHERE sku = 'a'")
            conn.execute("INSERT INTO public.orders VALUES (2, 'second')")
            conn.execute("DELETE FROM public.orders WHERE id = 1")
            # Two rows alike (no key tells them apart), and one deleted: each an event.
            for what in ("logout", "logout", "refund"):
                conn.execute("INSERT INTO inv.audit VALUES ('2026-01-02Z', %s, 2.25)", (what,))
            conn.execute("DELETE FROM inv.audit WHERE what = 'refund'")
            conn.execute("INSERT INTO inv.readings VALUES (2, '2026-02-01', 30)")
            conn.execute("UPDATE inv.readings SET value = 11 WHERE day = '2025-06-01'")
            # To the other partition: Postgres deletes from one and inserts into the other.
            conn.execute("UPDATE inv.readings SET day = '2025-02-01' WHERE value = 30")
            # NaN in a decimal column is NULL in the lake (with a dead letter), every other
            # special value exact text; the event table takes a NaN too.
            conn.execute("INSERT INTO inv.audit VALUES ('2026-01-03Z', 'void', 'NaN')")
            conn.execute("INSERT INTO inv.ledger VALUES (3, 'NaN', '-Infinity', 0, %s)", (big,))
            conn.execute("UPDATE inv.ledger SET amount = 'NaN', ratio = 'NaN' WHERE id = 2")
            # Every existing row changes at the source with no change event for it.
            conn.execute("ALTER TABLE public.orders ADD COLUMN locale text NOT NULL DEFAULT 'en'")
            conn.execute("ALTER TABLE public.orders RENAME COLUMN note TO memo")
            conn.execute("INSERT INTO public.orders VALUES (3, 'third', 'fr')")
        # A quiet database on a server writing WAL elsewhere: waiting for Debezium to read
        # everything still ends (it writes the connector's heartbeat).
        write_elsewhere(admin_dsn, unique)
        said = changelake_here("run", "--once", env=env).stdout
        # The rows no change touched since the ALTERs are re-sent, and the run waits for them
        # (moving its quiet connector on with the heartbeat query) and applies them before it
        # ends: `verify` right after finds every row.
        assert "orders: columns memo, locale were added at the source" in said, said
        assert re.search(r"\(signal [0-9a-f-]{36}\)", said), said
        assert "waiting (up to 600s) for the rows this run asked for" in said, said
        report = json.loads(changelake_here("verify", "--json", env=env).stdout)
        assert [(t["table"], t["equal"], t["delta"]["rows"]) for t in report["tables"]] == [
            ("stock", True, 2),
            ("orders", True, 2),
            ("events", True, 2),
            ("audit", True, 4),
            ("readings", True, 3),
            ("ledger", True, 3),
        ]
        errors = json.loads(
            changelake_here("query", "SELECT reason FROM _errors", "--json", env=env).stdout
        )
        assert sorted(e["reason"].split(":")[0] for e in errors) == [
            "amount = NaN",  # the audit event
            "amount = NaN",  # the snapshot's ledger 1
            "amount = NaN",  # ledger 3
            "amount = NaN",  # ledger 2 updated
        ]
        # `topics` shows the project's own prefix: the partitioned table's changes in its topic.
        shown = json.loads(changelake("topics", "--json", "--sample", "1", env=env).stdout)
        assert all(t["topic"].startswith(f"{prefix}.") for t in shown)
        readings = next(t for t in shown if t["topic"] == f"{prefix}.inv.readings")
        assert readings["records"] >= 5  # 2 snapshot rows, an insert, an update, a move (2+)
        audit = pl_events(tmp_path / "lake" / prefix / "inv" / "audit")
        assert audit == [
            ("r", "login"),
            *[("c", "logout")] * 2,
            ("c", "refund"),
            ("d", "refund"),
            ("c", "void"),
        ]
        topic = f"{prefix}.inv.audit"
        changelake("connectors", "apply", env=env)  # again: existing topics get their settings
        policy = kafka_io.topic_config(settings.kafka_bootstrap, topic)["cleanup.policy"]
        assert policy == "delete"  # a compacted topic would refuse its key-less records
        assert Path(tmp_path / "lake" / prefix / "public" / "orders" / "_delta_log").is_dir()

        # Without a heartbeat query the wait cannot end, and says why.
        source = source_of(settings, config)
        write_elsewhere(admin_dsn, unique)
        with pytest.raises(ChangelakeError, match=r"has no heartbeat\.action\.query") as stuck:
            wait_caught_up(replace(source, heartbeat_query=""), prefix, timeout_s=3)
        assert f"replication slot {prefix} has confirmed" in stuck.value.message
    finally:
        removal.delete(settings, name, drop_slot=True, progress=lambda _: None)
        topics = kafka_io.list_topics(settings.kafka_bootstrap, prefix)
        topics += kafka_io.list_topics(settings.kafka_bootstrap, f"__debezium-heartbeat.{prefix}")
        kafka_io.delete_topics(settings.kafka_bootstrap, topics)
