"""`connectors rebuild` refuses, having changed nothing, what would stop it halfway: a running
pipeline (it would apply the topics the rebuild deletes) and a connector with no file to apply
again. Both are checked before anything talks to Connect, Kafka or Postgres."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from changelake.apply import rebuild
from changelake.exceptions import ChangelakeError, ConfigError
from changelake.settings import Settings, load_settings


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
    names = {r.name for r in rebuild.check(settings, "shop-postgres")}
    assert {"customers", "orders"} <= names
