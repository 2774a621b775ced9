"""Bad input that needs no running service: a broken lake.json, a table nobody captures, a
service that is not there. Each gives a message naming the file, the table or the service, a
non-zero exit, and leaves nothing behind (no lake, no checkpoints)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from tests.support import changelake


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "CHANGELAKE_LAKE": str(tmp_path / "lake"),
        "CHANGELAKE_CHECKPOINTS": str(tmp_path / "checkpoints"),
    }


def refused(env: dict[str, str], *args: str) -> str:
    result = changelake(*args, check=False, env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert not Path(env["CHANGELAKE_LAKE"]).exists()
    assert not Path(env["CHANGELAKE_CHECKPOINTS"]).exists()
    return result.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"soft_delete": ["orders",]}', "lake.json: line 1 column 27"),
        ('{"soft_deletes": ["orders"]}', "lake.json: soft_deletes: unknown field"),
        ('{"soft_delete": "orders"}', "lake.json: soft_delete: must be a list of table names"),
        ('{"soft_delete": ["invoices"]}', "lake.json: soft_delete: no captured table invoices"),
        ('{"deletion_vectors": []}', "lake.json: deletion_vectors: no longer an option: every"),
        ('{"history": ["x"]}', "lake.json: history: no captured table x"),
    ],
)
def test_a_bad_lake_json_is_named_before_anything_runs(
    tmp_path: Path, env: dict[str, str], text: str, expected: str
) -> None:
    config = tmp_path / "lake.json"
    config.write_text(text)
    env["CHANGELAKE_LAKE_CONFIG"] = str(config)
    assert expected in refused(env, "run", "--once")


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--once", "--tables", "customers,nosuch"],
        ["verify", "--tables", "nosuch"],
        ["reindex", "--tables", "nosuch"],
        ["search", "lamp", "--tables", "nosuch"],
    ],
)
def test_an_unknown_table_is_named_with_the_ones_that_exist(
    env: dict[str, str], command: list[str]
) -> None:
    err = refused(env, *command)
    assert "no captured table named nosuch" in err
    assert "captured tables: customers, order_lines, orders, products" in err


# Each command with the first service it needs down: whatever the others do, the answer is the
# same. (With Kafka up, `run` names OpenSearch next: tests/integration/test_bad_input.py.)
@pytest.mark.parametrize(
    ("variable", "command", "service"),
    [
        ("CHANGELAKE_KAFKA_PORT", ["run"], "Kafka is not reachable at 127.0.0.1:{port}"),
        ("CHANGELAKE_PG_PORT", ["verify"], "cannot connect to Postgres at 127.0.0.1:{port}/shop"),
        (
            "CHANGELAKE_PG_PORT",
            ["demo", "seed"],
            "cannot connect to Postgres at 127.0.0.1:{port}/shop",
        ),
        (
            "CHANGELAKE_CONNECT_PORT",
            ["connectors", "apply"],
            "Kafka Connect is not reachable at http://127.0.0.1:{port}",
        ),
        (
            "CHANGELAKE_OPENSEARCH_PORT",
            ["search", "lamp"],
            "OpenSearch is not reachable at http://127.0.0.1:{port}",
        ),
    ],
)
def test_a_service_down_at_start_is_named_with_its_address(
    env: dict[str, str], variable: str, command: list[str], service: str
) -> None:
    port = closed_port()
    env[variable] = str(port)
    err = refused(env, *command)
    assert service.format(port=port) in err
    assert "→ " in err  # and what to do about it
