"""Local checks of connector JSON: each problem names the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

from changelake.capture import connectors
from changelake.settings import load_settings


def problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "c.json"
    path.write_text(text)
    loaded, found = connectors.load(path)
    assert (loaded is None) == bool(found)
    return [str(p).replace(f"{path}: ", "") for p in found]


def test_the_shipped_connector_passes_local_checks() -> None:
    for path in connectors.default_files(load_settings()):
        loaded, found = connectors.load(path)
        assert found == [] and loaded is not None
        assert loaded.config["plugin.name"] == "pgoutput"
        assert loaded.config["topic.creation.default.cleanup.policy"] == "compact"
        assert loaded.config["database.password"].startswith("${env:")


def test_syntax_error_gives_line_and_column(tmp_path: Path) -> None:
    assert problems(tmp_path, '{"name": "a",\n "config": {,}}') == [
        "line 2 column 13: not JSON: Expecting property name enclosed in double quotes"
    ]


def test_shape_problems_are_all_listed(tmp_path: Path) -> None:
    doc = {"nme": "a", "config": {"tasks.max": 1, "database.password": "secret!"}}
    assert problems(tmp_path, json.dumps(doc)) == [
        "nme: unknown top-level field",
        "name: missing: the connector's name (a string)",
        "config.connector.class: missing: which connector to run",
        'config.tasks.max: must be a string (Connect\'s form): "1"',
        "config.database.password: secret written inline; use a config provider:"
        " ${env:NAME} or ${file:PATH:KEY}",
    ]


def test_config_providers_are_accepted_for_secrets(tmp_path: Path) -> None:
    doc = {"name": "a", "config": {"connector.class": "X", "database.password": "${file:/s:p}"}}
    assert problems(tmp_path, json.dumps(doc)) == []


def test_a_name_inside_config_must_match(tmp_path: Path) -> None:
    doc = {"name": "a", "config": {"connector.class": "X", "name": "b"}}
    assert problems(tmp_path, json.dumps(doc)) == ["config.name: 'b' differs from 'a'"]
