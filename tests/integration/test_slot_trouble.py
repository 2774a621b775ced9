"""A replication slot dropped under a connector, as production does it: `status` names the slot
gone (the connector stopped, then failed), and once a slot of that name is made again, names
that it starts after the connector's position (the changes between never captured): the tables
shown `stalled`, exit 3, never `running`. Debezium fails on a missing slot before it would make
one, so a slot made again is someone's doing."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from changelake.capture.connect_api import ConnectApi
from changelake.capture.connectors import connector_state
from changelake.capture.removal import drop_replication_slot
from changelake.capture.source import source_of
from changelake.exit_codes import NEEDS_A_PERSON
from changelake.waiting import wait_until
from tests.integration.pipeline_fixtures import Pipeline

pytestmark = pytest.mark.stack


def _status(p: Pipeline) -> dict[str, Any]:
    done = p.cli("status", "--json", check=False)
    assert done.returncode == NEEDS_A_PERSON, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_status_names_a_dropped_slot_then_the_slot_debezium_made_again(
    pipeline: Callable[..., Pipeline], unique: str
) -> None:
    t = f"slot_{unique}"
    p = pipeline(
        [t], [f"CREATE TABLE public.{t} (id int PRIMARY KEY)", f"INSERT INTO {t} VALUES (1)"]
    )
    p.caught_up()  # Connect stored an offset past the snapshot
    name, slot = p.prefix.replace("_", "-"), p.prefix
    api = ConnectApi(p.settings.connect_url)
    api.put(f"/connectors/{name}/stop", None)
    assert wait_until(lambda: connector_state(api, name)["connector"] == "STOPPED", 60)
    config = json.loads((p.home / "connectors" / f"{name}.json").read_text())["config"]
    drop_replication_slot(source_of(p.settings, config), slot)
    p.sql(f"INSERT INTO {t} VALUES (2)")  # made while no slot keeps WAL for the connector

    report = _status(p)
    assert report["tables"][t]["state"] == "stalled"
    assert f"replication slot {slot} is gone from" in report["tables"][t]["error"]
    (line,) = [x for x in report["problems"] if x.startswith("capture stalled")]
    assert f"tables {t} get no changes" in line and f"delete {name} --drop-slot" in line

    # Debezium checks its slot before it would make one: the task fails, the slot stays gone.
    api.put(f"/connectors/{name}/resume", None)
    assert wait_until(lambda: "no longer available" in connector_state(api, name)["failed"], 90)
    assert "is gone from" in _status(p)["tables"][t]["error"]
    # Made again by hand (or a tool that "fixes" the failure): it starts after the offset.
    p.sql("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
    error = _status(p)["tables"][t]["error"]
    assert f"replication slot {slot} on " in error and f"where {name} stopped" in error
    assert "never captured" in error
