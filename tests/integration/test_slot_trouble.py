"""A replication slot dropped under a connector, as production does it: `status` names the slot
gone (the connector stopped, then failed), and once a slot of that name is made again, names
that it starts after the connector's position (the changes between never captured): the tables
shown `stalled`, exit 3, never `running`. Debezium fails on a missing slot before it would make
one, so a slot made again is someone's doing. Then `run --once`, with no other command, re-syncs
it: the rows inserted, updated and deleted while no slot kept them reach the lake, row for row.
Last, a restore from a backup, named by `status` and undone by `connectors rebuild`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from changelake.capture import source_identity
from changelake.capture.connect_api import ConnectApi
from changelake.capture.connectors import connector_state
from changelake.capture.removal import drop_replication_slot
from changelake.capture.source import source_of
from changelake.capture.source_identity import Identity
from changelake.exit_codes import NEEDS_A_PERSON, NOT_RUNNING
from changelake.waiting import wait_until
from tests.integration.pipeline_fixtures import Pipeline

pytestmark = pytest.mark.stack


def _status(p: Pipeline) -> dict[str, Any]:
    done = p.cli("status", "--json", check=False)
    assert done.returncode == NEEDS_A_PERSON, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def _status_code(p: Pipeline) -> int:
    return p.cli("status", "--json", check=False).returncode


def test_status_names_a_dropped_slot_then_the_run_re_syncs_it(
    pipeline: Callable[..., Pipeline], unique: str
) -> None:
    t = f"slot_{unique}"
    p = pipeline(
        [t],
        [
            f"CREATE TABLE public.{t} (id int PRIMARY KEY, note text)",
            f"INSERT INTO {t} SELECT g, 'row ' || g FROM generate_series(1, 6) g",
        ],
    )
    p.run_once()  # the lake has the rows; Connect stored an offset past the snapshot
    name, slot = p.prefix.replace("_", "-"), p.prefix
    api = ConnectApi(p.settings.connect_url)
    api.put(f"/connectors/{name}/stop", None)
    assert wait_until(lambda: connector_state(api, name)["connector"] == "STOPPED", 60)
    config = json.loads((p.home / "connectors" / f"{name}.json").read_text())["config"]
    drop_replication_slot(source_of(p.settings, config), slot)
    # Made while no slot keeps WAL for the connector: never captured.
    p.sql(f"INSERT INTO {t} VALUES (7, 'in the gap')")
    p.sql(f"UPDATE {t} SET note = 'changed in the gap' WHERE id IN (2, 3)")
    p.sql(f"DELETE FROM {t} WHERE id IN (4, 5)")

    report = _status(p)
    assert report["tables"][t]["state"] == "stalled"
    assert f"replication slot {slot} is gone from" in report["tables"][t]["error"]
    (line,) = [x for x in report["problems"] if x.startswith("capture stalled")]
    assert f"tables {t} get no changes" in line and "`changelake run` re-syncs it" in line

    # Debezium checks its slot before it would make one: the task fails, the slot stays gone.
    api.put(f"/connectors/{name}/resume", None)
    assert wait_until(lambda: "no longer available" in connector_state(api, name)["failed"], 90)
    assert "is gone from" in _status(p)["tables"][t]["error"]
    # Made again by hand (or a tool that "fixes" the failure): it starts after the offset.
    p.sql("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
    error = _status(p)["tables"][t]["error"]
    assert f"replication slot {slot} on " in error and f"where {name} stopped" in error
    assert "never captured" in error

    # The run re-syncs it by itself: capture from a new slot, the table sent again, the rows
    # deleted in the gap deleted (a delete event and a tombstone in the topic); then changes
    # stream as before.
    done = p.cli("run", "--once")
    assert f"re-sync of {name}: capturing again from a new slot" in done.stdout
    assert f"re-sync of {name} done: 2 rows deleted during the gap deleted" in done.stdout
    p.assert_equal(t, ["id"])
    # The deletes went through the log: a table made again from its topic has none of them.
    p.run_once("--resnapshot", t, "--yes")
    p.assert_equal(t, ["id"])
    p.sql(f"DELETE FROM {t} WHERE id = 6")
    p.sql(f"INSERT INTO {t} VALUES (8, 'after')")
    p.run_once()
    p.assert_equal(t, ["id"])
    assert _status_code(p) == NOT_RUNNING  # nothing wrong any more; no pipeline runs

    # A restore: the database comes back without rows the lake and the topic hold (here deleted
    # and changed while nothing captured), under another system identifier. `status` names it;
    # one command makes the lake equal to it again.
    api.put(f"/connectors/{name}/stop", None)
    assert wait_until(lambda: connector_state(api, name)["connector"] == "STOPPED", 60)
    drop_replication_slot(source_of(p.settings, config), slot)
    p.sql(f"DELETE FROM {t} WHERE id IN (1, 7)")
    p.sql(f"UPDATE {t} SET note = 'as the backup had it' WHERE id = 8")
    source_identity.remember(p.settings.run_dir, name, Identity("42", 1))
    assert "system identifier" in _status(p)["tables"][t]["error"]
    done = p.cli("connectors", "rebuild", name, "--yes")
    assert f"{p.prefix}.public.{t} deleted, with the records of the database" in done.stdout
    assert p.assert_equal(t, ["id"]) == 3  # 2, 3 and 8
    assert _status_code(p) == NOT_RUNNING
