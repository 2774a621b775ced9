"""The local stack itself: healthy, loopback only, unprivileged, idempotent, stops cleanly."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import psycopg
import pytest

from changelake import waiting
from changelake.settings import Settings
from changelake.stack import process
from tests.support import changelake

pytestmark = pytest.mark.stack
PORTS = {"postgres": 5432, "kafka": 9092, "connect": 8083, "opensearch": 9200}


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a LISTEN socket on `port`, from /proc/net/tcp and tcp6."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


@pytest.fixture
def now(stack: dict[str, Any]) -> dict[str, Any]:
    """The stack as it is now: other tests restart services (the search outage test stops
    OpenSearch), so the session's first snapshot of pids may be stale."""
    report: dict[str, Any] = json.loads(changelake("stack", "status", "--json").stdout)
    return report


LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}


def test_every_service_is_healthy_on_loopback_and_not_root(
    now: dict[str, Any], settings: Settings
) -> None:
    services = now["services"]
    assert {name: svc["state"] for name, svc in services.items()} == dict.fromkeys(PORTS, "healthy")
    assert services["kafka"]["bootstrap"] == settings.kafka_bootstrap
    assert services["connect"]["url"] == settings.connect_url
    assert services["opensearch"]["url"] == settings.opensearch_url
    ports = {
        "postgres": settings.postgres_port,
        "kafka": settings.kafka_port,
        "connect": settings.connect_port,
        "opensearch": settings.opensearch_port,
    }
    for name, port in ports.items():
        addresses = listening_addresses(port)
        assert addresses and addresses <= LOOPBACK, f"{name} listens on {addresses}"
        uid = next(
            line.split()[1]
            for line in Path(f"/proc/{services[name]['pid']}/status").read_text().splitlines()
            if line.startswith("Uid:")
        )
        if os.geteuid() == 0:
            assert uid != "0", f"{name} runs as root"


def test_debezium_role_is_least_privilege(admin_dsn: str) -> None:
    with psycopg.connect(admin_dsn) as conn:
        row = conn.execute(
            "SELECT rolsuper, rolreplication, rolcreatedb, rolcreaterole FROM pg_roles"
            " WHERE rolname = 'debezium'"
        ).fetchone()
        can_write = conn.execute(
            "SELECT has_table_privilege('debezium', 'public.customers', 'INSERT')"
        ).fetchone()
    assert row == (False, True, False, False)
    assert can_write == (False,)


def test_up_twice_is_harmless(now: dict[str, Any]) -> None:
    before = {name: svc["pid"] for name, svc in now["services"].items()}
    result = changelake("stack", "up")
    assert result.stdout.count("already running") == 4, result.stdout
    after = json.loads(changelake("stack", "status", "--json").stdout)["services"]
    assert {name: svc["pid"] for name, svc in after.items()} == before


def test_a_service_stops_cleanly_and_comes_back(now: dict[str, Any], settings: Settings) -> None:
    pid = now["services"]["opensearch"]["pid"]
    stopped = changelake("stack", "down", "opensearch")
    assert "opensearch  stopped" in stopped.stdout  # TERM sufficed: no KILL was needed
    assert not waiting.alive(pid)
    assert not process.port_open(settings.host, settings.opensearch_port)
    status = json.loads(changelake("stack", "status", "--json", check=False).stdout)
    assert status["services"]["opensearch"]["state"] == "stopped"
    changelake("stack", "up", "opensearch")
    status = json.loads(changelake("stack", "status", "--json").stdout)
    assert status["services"]["opensearch"]["state"] == "healthy"
