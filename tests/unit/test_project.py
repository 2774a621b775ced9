"""A project of the user's own (`--project DIR` / CHANGELAKE_PROJECT): its connectors/ and
schemas/ are what every command reads; lake.json and search.json are optional there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from changelake import tables
from changelake.capture.source_checks import POSTGRES_CONNECTOR
from changelake.exceptions import ConfigError
from changelake.settings import load_settings
from tests.support import changelake

CONNECTOR = {
    "name": "inventory",
    "config": {
        "connector.class": POSTGRES_CONNECTOR,
        "database.dbname": "inventory",
        "topic.prefix": "inv",
        "slot.name": "inv",
        "table.include.list": "public.customers,stock.items,changelake.heartbeat",
    },
}


def project(tmp_path: Path) -> Path:
    (tmp_path / "connectors").mkdir()
    (tmp_path / "connectors" / "inventory.json").write_text(json.dumps(CONNECTOR))
    return tmp_path


def test_a_project_with_only_a_connector_file_captures_its_tables(tmp_path: Path) -> None:
    settings = load_settings({"CHANGELAKE_PROJECT": str(project(tmp_path))})
    assert settings.connectors_dir == tmp_path / "connectors"
    assert settings.config_dir == tmp_path / "schemas"
    refs = tables.captured(settings)
    # The checkout's search.json indexes `customers`: it is not this project's, so not read.
    assert [(r.topic, r.search, r.soft_delete) for r in refs] == [
        ("inv.public.customers", None, False),
        ("inv.stock.items", None, False),
    ]
    assert dict(refs[0].source)["database.dbname"] == "inventory"


def test_the_project_option_is_what_a_command_reads(tmp_path: Path) -> None:
    (project(tmp_path) / "schemas").mkdir()
    (tmp_path / "schemas" / "lake.json").write_text('{"soft_delete": ["orders"]}')
    result = changelake("--project", str(tmp_path), "run", "--once", check=False)
    assert result.returncode == 1
    assert f"{tmp_path / 'schemas' / 'lake.json'}: soft_delete: no captured table orders" in (
        result.stderr
    )


def test_tables_of_one_name_are_named_by_their_topic_prefix_each(tmp_path: Path) -> None:
    other = {**CONNECTOR, "name": "crm"}
    other["config"] = {
        **CONNECTOR["config"],
        "topic.prefix": "crm-eu",
        "slot.name": "crm",
        "table.include.list": "public.customers,sales.customers,public.orders",
    }
    (project(tmp_path) / "connectors" / "crm.json").write_text(json.dumps(other))
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "lake.json").write_text('{"soft_delete": ["crm_eu_sales_customers"]}')
    refs = tables.captured(load_settings({"CHANGELAKE_PROJECT": str(tmp_path)}))
    named = {(r.name, r.topic, r.table, r.soft_delete) for r in refs}
    assert named == {
        # One connector with the name in two schemas: the schema too.
        ("crm_eu_public_customers", "crm-eu.public.customers", "customers", False),
        ("crm_eu_sales_customers", "crm-eu.sales.customers", "customers", True),
        ("inv_customers", "inv.public.customers", "customers", False),
        ("orders", "crm-eu.public.orders", "orders", False),  # captured once: its own name
        ("items", "inv.stock.items", "items", False),
    }
    paths = {r.path("/lake") for r in refs}
    assert "/lake/crm-eu/sales/customers" in paths and "/lake/inv/public/customers" in paths


def test_two_tables_that_would_share_a_name_are_refused_naming_both(tmp_path: Path) -> None:
    other = {**CONNECTOR, "name": "crm"}
    # Prefixes inv-x and inv_x both qualify customers as inv_x_customers.
    other["config"] = {**CONNECTOR["config"], "topic.prefix": "inv-x", "slot.name": "crm"}
    mine = {**CONNECTOR, "config": {**CONNECTOR["config"], "topic.prefix": "inv_x"}}
    (project(tmp_path) / "connectors" / "inventory.json").write_text(json.dumps(mine))
    (tmp_path / "connectors" / "crm.json").write_text(json.dumps(other))
    with pytest.raises(ConfigError) as refused:
        tables.captured(load_settings({"CHANGELAKE_PROJECT": str(tmp_path)}))
    assert refused.value.message.startswith("two captured tables would both be named inv_x_")


def test_an_event_table_takes_no_soft_deletes(tmp_path: Path) -> None:
    events = {
        **CONNECTOR["config"],
        "topic.creation.default.cleanup.policy": "compact",
        "topic.creation.groups": "events",
        "topic.creation.events.include": r"inv\.stock\.items",
        "topic.creation.events.cleanup.policy": "delete",
    }
    (project(tmp_path) / "connectors" / "inventory.json").write_text(
        json.dumps({**CONNECTOR, "config": events})
    )
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "lake.json").write_text('{"soft_delete": ["items"]}')
    settings = load_settings({"CHANGELAKE_PROJECT": str(tmp_path)})
    with pytest.raises(ConfigError) as refused:
        tables.captured(settings)
    assert "soft_delete: items is an append-only event table" in refused.value.message
    (tmp_path / "schemas" / "lake.json").write_text("{}")
    assert [(r.name, r.events) for r in tables.captured(settings)] == [
        ("customers", False),
        ("items", True),
    ]
