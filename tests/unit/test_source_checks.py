"""The pure parts of checking a connector file against its database: which tables its include
list captures, which key columns it names, the heartbeat query's table, and placeholders
resolved as Connect resolves them."""

from __future__ import annotations

from pathlib import Path

import pytest

from changelake.capture.source import resolve
from changelake.capture.source_checks import (
    WRITTEN_TABLE,
    Found,
    Table,
    excluded,
    generated_problems,
    key_columns,
    listed,
    publication_problems,
)
from changelake.exceptions import ConfigError


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


def _problems(name: str, partitioned: bool, published: set[str], via_root: bool) -> list[str]:
    table = Table(name, True, True, True, False, partitioned)
    found = Found({name: table}, published, None, via_root)
    return [message for _, message in publication_problems(name, table, found, "pub")]


def test_a_partitioned_table_needs_a_publication_through_its_root() -> None:
    # Named in the publication, which sends its partitions' changes as theirs: set the option.
    (named,) = _problems("app.events", True, {"app.events", "app.events_2026"}, False)
    assert "app.events: a partitioned table" in named
    assert named.endswith("(ALTER PUBLICATION pub SET (publish_via_partition_root = true))")
    # Not named either: both statements, in the order they must run.
    (absent,) = _problems("app.events", True, set(), False)
    assert absent.endswith(
        "(ALTER PUBLICATION pub ADD TABLE app.events; "
        "ALTER PUBLICATION pub SET (publish_via_partition_root = true))"
    )
    assert _problems("app.events", True, {"app.events"}, True) == []


def test_a_plain_table_missing_from_the_publication_is_named_with_its_fix() -> None:
    (missing,) = _problems("app.users", False, {"app.events"}, False)
    assert missing.startswith("app.users: not in publication pub")
    assert missing.endswith("(ALTER PUBLICATION pub ADD TABLE app.users)")
    assert _problems("app.users", False, {"app.users"}, False) == []


def test_a_generated_column_must_be_left_out_and_init_s_entry_leaves_it_out() -> None:
    (problem,) = generated_problems("app.users", ["email_domain"], {})
    field, message = problem
    assert field == "config.column.exclude.list"
    assert message.startswith("app.users: column email_domain is generated")
    entry = r"app\.users\.email_domain"
    assert f'"column.exclude.list": "{entry}"' in message
    config = {"column.exclude.list": f"other\\.t\\.x, {entry}"}
    assert excluded(config, "app.users", "email_domain")
    assert excluded(config, "App.Users", "EMAIL_DOMAIN")  # Debezium matches case-blind
    assert not excluded(config, "app.users", "email")
    assert list(generated_problems("app.users", ["email_domain"], config)) == []
