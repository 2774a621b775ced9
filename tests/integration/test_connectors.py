"""`changelake connectors apply` on bad input: file and field named, nothing registered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from changelake import kafka_io
from changelake.capture.connect_api import ConnectApi
from changelake.settings import CONNECT_CONFIG_TOPIC, Settings
from tests.support import changelake

pytestmark = pytest.mark.stack


def shop_config(settings: Settings, name: str, **overrides: str) -> dict[str, Any]:
    doc = json.loads((settings.connectors_dir / "shop-postgres.json").read_text())
    doc["name"] = name
    doc["config"].update({"slot.name": name.replace("-", "_"), "topic.prefix": name, **overrides})
    return doc


def registered(settings: Settings) -> list[str]:
    names: list[str] = ConnectApi(settings.connect_url).get("/connectors")
    return names


def write(tmp_path: Path, name: str, doc: Any) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc, indent=2))
    return path


def apply_fails(*files: Path) -> str:
    result = changelake("connectors", "apply", *map(str, files), check=False)
    assert result.returncode != 0, result.stdout
    assert "nothing was registered" in result.stderr
    return result.stderr


def test_syntax_error_names_file_and_line(
    settings: Settings, stack: Any, tmp_path: Path, unique: str
) -> None:
    bad = write(tmp_path, f"syntax-{unique}", '{"name": "x",\n  "config": {\n    "a": "b",\n}\n')
    message = apply_fails(bad)
    assert f"{bad}: line 4 column 1: not JSON" in message


def test_missing_connector_class_is_named(
    settings: Settings, stack: Any, tmp_path: Path, unique: str
) -> None:
    doc = shop_config(settings, f"noclass-{unique}")
    del doc["config"]["connector.class"]
    bad = write(tmp_path, "noclass", doc)
    assert f"{bad}: config.connector.class: missing" in apply_fails(bad)
    assert doc["name"] not in registered(settings)


def test_unknown_class_and_a_good_file_register_nothing(
    settings: Settings, stack: Any, tmp_path: Path, unique: str
) -> None:
    good = write(tmp_path, "good", shop_config(settings, f"good-{unique}"))
    bad_doc = shop_config(settings, f"unknown-{unique}", **{"connector.class": "io.example.Nope"})
    bad = write(tmp_path, "bad", bad_doc)
    message = apply_fails(good, bad)
    assert (
        f"{bad}: config.connector.class: no installed connector is called 'io.example.Nope'"
        in message
    )
    assert "io.debezium.connector.postgresql.PostgresConnector" in message
    assert f"good-{unique}" not in registered(settings)


def test_a_converter_connect_does_not_have_is_named(
    settings: Settings, stack: Any, tmp_path: Path, unique: str
) -> None:
    doc = shop_config(
        settings, f"noconv-{unique}", **{"value.converter": "dev.changelake.connect.Absent"}
    )
    bad = write(tmp_path, "noconv", doc)
    message = apply_fails(bad)
    assert f"{bad}: config.value.converter: " in message
    assert "Class dev.changelake.connect.Absent could not be found" in message
    assert "dev.changelake.connect.LeanJsonConverter" in message  # what this Connect does have
    assert doc["name"] not in registered(settings)


def test_wrong_password_is_reported_by_validation(
    settings: Settings, stack: Any, tmp_path: Path, unique: str
) -> None:
    # Connect runs as the service user, so the secret file must be where that user can read it.
    secret = settings.home / "test-secrets" / f"{unique}.properties"
    secret.parent.mkdir(exist_ok=True)
    secret.write_text("password=not-the-password\n")
    secret.chmod(0o644)
    doc = shop_config(
        settings, f"wrongpw-{unique}", **{"database.password": f"${{file:{secret}:password}}"}
    )
    bad = write(tmp_path, "wrongpw", doc)
    try:
        assert 'password authentication failed for user "debezium"' in apply_fails(bad)
    finally:
        secret.unlink()
    assert doc["name"] not in registered(settings)


def test_inline_password_is_refused_before_connect_sees_it(
    settings: Settings, stack: Any, tmp_path: Path, unique: str
) -> None:
    doc = shop_config(settings, f"inline-{unique}", **{"database.password": "hunter2"})
    bad = write(tmp_path, "inline", doc)
    assert f"{bad}: config.database.password: secret written inline" in apply_fails(bad)


def test_shop_connector_applies_idempotently(settings: Settings, stack: Any) -> None:
    changelake("connectors", "apply")
    configs = kafka_io.watermarks(settings.kafka_bootstrap, CONNECT_CONFIG_TOPIC)
    again = changelake("connectors", "apply")
    assert "shop-postgres        unchanged" in again.stdout
    # Nothing was written to Connect: a PUT of the same config restarts the connector's task.
    assert kafka_io.watermarks(settings.kafka_bootstrap, CONNECT_CONFIG_TOPIC) == configs
    status = json.loads(changelake("connectors", "status", "--json").stdout)
    assert status["shop-postgres"]["state"] == "RUNNING"
    assert [t["state"] for t in status["shop-postgres"]["tasks"]] == ["RUNNING"]


def test_what_the_source_database_refuses_is_named_before_anything_is_registered(
    settings: Settings, stack: Any, admin_dsn: str, tmp_path: Path, unique: str
) -> None:
    outside, unreadable, keyless = f"outside_{unique}", f"secret_{unique}", f"keyless_{unique}"
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        # The shop's publication covers the schemas public and changelake only.
        conn.execute(f"CREATE SCHEMA {outside}")
        conn.execute(f"CREATE TABLE {outside}.t (id int PRIMARY KEY)")
        conn.execute(f"GRANT USAGE ON SCHEMA {outside} TO debezium")
        conn.execute(f"GRANT SELECT ON {outside}.t TO debezium")
        conn.execute(f"CREATE TABLE public.{unreadable} (id int PRIMARY KEY)")
        conn.execute(f"REVOKE SELECT ON public.{unreadable} FROM debezium")
        conn.execute(f"CREATE TABLE public.{keyless} (at timestamptz, what text)")
    tables = f"public.nope_{unique},{outside}.t,public.{unreadable},public.{keyless}"
    doc = shop_config(
        settings,
        f"refused-{unique}",
        **{
            "table.include.list": tables,
            "slot.name": "changelake_shop",  # the shop connector's
            "heartbeat.action.query": "INSERT INTO changelake.beat_gone (id) VALUES (1)",
        },
    )
    bad = write(tmp_path, "refused", doc)
    lines = [line for line in apply_fails(bad).splitlines() if line.startswith(f"  {bad}: ")]
    db = f"{settings.postgres_host}:{settings.postgres_port}/shop"
    assert sorted(line.removeprefix(f"  {bad}: ") for line in lines) == sorted(
        [
            "config.slot.name: slot changelake_shop is the slot of connector shop-postgres",
            f"config.table.include.list: public.nope_{unique}: no such table in {db}",
            f"config.table.include.list: {outside}.t: not in publication changelake_shop, so "
            "none of its changes would be captured (ALTER PUBLICATION changelake_shop ADD "
            f"TABLE {outside}.t)",
            f"config.table.include.list: public.{unreadable}: debezium cannot read it, so its "
            "snapshot would fail (GRANT USAGE ON SCHEMA public TO debezium; GRANT SELECT ON "
            f"public.{unreadable} TO debezium)",
            f"config.table.include.list: public.{keyless}: has no primary key: its changes "
            "would reach Kafka without a key, which a compacted topic refuses, and the "
            "connector would fail for every table; add a primary key, name key columns "
            f'("message.key.columns": "public.{keyless}:<col>,…"), or capture it as an '
            "append-only event table: a topic.creation group with cleanup.policy delete that "
            "includes its topic (`connectors init` writes one)",
            "config.heartbeat.action.query: changelake.beat_gone: no such table in " + db,
        ]
    )
    assert doc["name"] not in registered(settings)
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {outside} CASCADE")
        conn.execute(f"DROP TABLE public.{unreadable}, public.{keyless}")
