"""One real stack per test session: reuse a running one, or start it and stop it afterwards.

Tests isolate themselves by names (their own tables, connectors, topics and keys), never by
starting services of their own.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from changelake import kafka_io
from changelake.capture import removal
from changelake.settings import Settings, load_settings
from tests.support import changelake


@pytest.fixture(scope="session")
def settings() -> Settings:
    return load_settings()


@pytest.fixture(scope="session")
def stack() -> Iterator[dict[str, Any]]:
    before = json.loads(changelake("stack", "status", "--json", check=False).stdout)
    stopped = [name for name, svc in before["services"].items() if svc["state"] == "stopped"]
    if stopped:
        changelake("stack", "up")
    report = json.loads(changelake("stack", "status", "--json").stdout)
    yield report
    if stopped:  # only what this session started; a stack the user runs stays up
        changelake("stack", "down", *stopped)


@pytest.fixture(scope="session")
def admin_dsn(stack: dict[str, Any]) -> str:
    return str(stack["services"]["postgres"]["dsn"])


@pytest.fixture(scope="session")
def bootstrap(stack: dict[str, Any]) -> str:
    return str(stack["services"]["kafka"]["bootstrap"])


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture
def capture(
    settings: Settings, stack: dict[str, Any], tmp_path: Path
) -> Iterator[Callable[..., str]]:
    """Start a connector of the test's own for the given tables; returns its topic prefix.

    It is the shipped connectors/shop-postgres.json with its own name, prefix and slot, so the
    test exercises the real configuration while leaving the shop connector alone; `overrides`
    change settings of it that the test is about.
    """
    made: list[str] = []

    def start(tables: str, overrides: dict[str, str] | None = None) -> str:
        name = f"test-{uuid.uuid4().hex[:10]}"
        doc = json.loads((settings.connectors_dir / "shop-postgres.json").read_text())
        prefix = name.replace("-", "_")
        doc["name"] = name
        doc["config"].update(
            {
                "topic.prefix": prefix,
                "slot.name": prefix,
                "table.include.list": tables,
                "topic.creation.meta.include": (
                    f"{prefix}\\.transaction|__debezium-heartbeat\\.{prefix}"
                ),
                **(overrides or {}),
            }
        )
        path = tmp_path / "connectors" / f"{name}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(doc))
        made.append(name)
        changelake("connectors", "apply", str(path))
        return prefix

    yield start
    for name in made:
        removal.delete(settings, name, drop_slot=True, progress=lambda _: None)
        prefix = name.replace("-", "_")
        topics = kafka_io.list_topics(settings.kafka_bootstrap, prefix)
        topics += kafka_io.list_topics(settings.kafka_bootstrap, f"__debezium-heartbeat.{prefix}")
        kafka_io.delete_topics(settings.kafka_bootstrap, topics)
