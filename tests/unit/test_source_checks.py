"""The pure parts of checking a connector file against its database: which tables its include
list captures, which key columns it names, the heartbeat query's table, and placeholders
resolved as Connect resolves them."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.capture.source import resolve
from pipelines.capture.source_checks import WRITTEN_TABLE, key_columns, listed
from pipelines.exceptions import ConfigError


def test_include_list_entries_are_whole_case_blind_patterns() -> None:
    config = {"table.include.list": r"public.orders, public\.order_.*,Public.Customers,x.gone"}
    tables = ["public.orders", "public.order_lines", "public.orders_old", "public.customers"]
    assert listed(config, tables) == {
        "public.orders": ["public.orders"],  # not public.orders_old: matched whole
        r"public\.order_.*": ["public.order_lines"],
        "Public.Customers": ["public.customers"],
        "x.gone": [],
    }


def test_key_columns_are_read_per_table() -> None:
    config = {"message.key.columns": "public.events:at,kind; inventory.log:id"}
    assert key_columns(config, "public.events") == ["at", "kind"]
    assert key_columns(config, "inventory.log") == ["id"]
    assert key_columns(config, "public.other") == []


@pytest.mark.parametrize(
    ("query", "table"),
    [
        ("INSERT INTO changelake.heartbeat (id, ts) VALUES (1, now())", "changelake.heartbeat"),
        ('update "my schema".beat set ts = now()', '"my schema".beat'),
        ("INSERT INTO beat VALUES (1)", "beat"),
    ],
)
def test_the_heartbeat_query_names_its_table(query: str, table: str) -> None:
    match = WRITTEN_TABLE.search(query)
    assert match is not None and match.group(1) == table


def test_placeholders_resolve_from_the_environment_and_properties_files(tmp_path: Path) -> None:
    secret = tmp_path / "pg.properties"
    secret.write_text("# comment\nuser = reader\npassword=s3=cret\n")
    env = {"HOST": "db.internal"}
    assert resolve("${env:HOST}", env, "config.database.hostname") == "db.internal"
    assert resolve(f"${{file:{secret}:password}}", env, "f") == "s3=cret"
    assert resolve("plain", env, "f") == "plain"
    with pytest.raises(ConfigError, match=r"config.database.port: \$\{env:PORT\} is not set"):
        resolve("${env:PORT}", env, "config.database.port")
    with pytest.raises(ConfigError, match=r"f: .*pg\.properties has no key 'nope'"):
        resolve(f"${{file:{secret}:nope}}", env, "f")
