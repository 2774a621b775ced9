"""`connectors rebuild` refuses, having changed nothing, what would stop it halfway: a running
pipeline (it would apply the topics the rebuild deletes) and a connector with no file to apply
again. Both are checked before anything talks to Connect, Kafka or Postgres. The tables it makes
again stay written down until each is made, and the person is asked about each by name."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from changelake.apply import rebuild
from changelake.capture import rebuild as rebuild_marks
from changelake.exceptions import ChangelakeError, ConfigError
from changelake.settings import Settings, load_settings
from tests.support import ROOT


def _settings(tmp_path: Path) -> Settings:
    """The project's connector files, state in `tmp_path`."""
    return load_settings({**os.environ, "CHANGELAKE_HOME": str(tmp_path)})


def test_a_running_pipeline_is_refused(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    (settings.run_dir / "pipeline.json").write_text(json.dumps({"pid": os.getpid()}))
    with pytest.raises(ChangelakeError, match=rf"is running \(pid {os.getpid()}\)"):
        rebuild.check(settings, "shop-postgres")


def test_a_connector_without_a_file_is_refused_and_one_with_its_tables_found(
    tmp_path: Path,
) -> None:
    settings = _settings(tmp_path)
    with pytest.raises(ConfigError, match=r"no connector file in .* names connector 'nope'"):
        rebuild.check(settings, "nope")
    cf, refs = rebuild.check(settings, "shop-postgres")
    assert cf.name == "shop-postgres"
    names = {r.name for r in refs}
    assert {"customers", "orders"} <= names


def test_the_tables_to_make_again_are_kept_until_each_is_made(tmp_path: Path) -> None:
    rebuild_marks.mark(tmp_path, ["orders", "customers"])
    rebuild_marks.mark(tmp_path, ["orders"])  # a rebuild run again
    assert rebuild_marks.marked(tmp_path) == {"orders", "customers"}
    rebuild_marks.unmark(tmp_path, "orders")
    rebuild_marks.unmark(tmp_path, "not marked")
    assert rebuild_marks.marked(tmp_path) == {"customers"}


def test_the_question_names_the_tables_and_what_event_tables_keep(tmp_path: Path) -> None:
    _, refs = rebuild.check(_settings(tmp_path), "shop-postgres")
    asked = rebuild.question("shop-postgres", refs)
    assert asked.startswith("delete shop-postgres's slot and topics and make customers, ")
    assert "event tables" not in asked
    events = [replace(refs[0], events=True)]
    assert f"event tables {refs[0].name} keep their events" in rebuild.question("x", events)


def test_a_file_whose_snapshot_mode_takes_no_snapshot_is_refused(tmp_path: Path) -> None:
    doc = json.loads((ROOT / "connectors" / "shop-postgres.json").read_text())
    doc["config"]["snapshot.mode"] = "no_data"
    (tmp_path / "connectors").mkdir()
    (tmp_path / "connectors" / "shop-postgres.json").write_text(json.dumps(doc))
    env = {"CHANGELAKE_CONNECTORS_DIR": str(tmp_path / "connectors")}
    settings = load_settings({**os.environ, "CHANGELAKE_HOME": str(tmp_path), **env})
    with pytest.raises(ConfigError, match=r"snapshot\.mode 'no_data' takes no snapshot"):
        rebuild.check(settings, "shop-postgres")
