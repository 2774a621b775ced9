"""`changelake stack up | down | status`: the four local services as one stack."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from changelake import waiting
from changelake.exceptions import ConfigError
from changelake.settings import Settings
from changelake.stack import process
from changelake.stack.connect import Connect
from changelake.stack.kafka import Kafka
from changelake.stack.opensearch import OpenSearch
from changelake.stack.postgres import Postgres
from changelake.stack.service import Service, ensure_service_user

Progress = Callable[[str], None]
SERVICE_TYPES: tuple[type[Service], ...] = (Postgres, Kafka, Connect, OpenSearch)
SERVICE_NAMES = tuple(cls.name for cls in SERVICE_TYPES)
# Connect stores its state in Kafka; everything else stands alone.
DEPENDS_ON = {"connect": "kafka"}


def services(settings: Settings, names: list[str] | None = None) -> list[Service]:
    chosen = [cls(settings) for cls in SERVICE_TYPES]
    if names:
        unknown = sorted(set(names) - set(SERVICE_NAMES))
        if unknown:
            raise ConfigError(
                f"unknown service(s): {', '.join(unknown)}",
                f"choose from: {', '.join(SERVICE_NAMES)}",
            )
        chosen = [svc for svc in chosen if svc.name in names]
    return chosen


def _launch(svc: Service, progress: Progress) -> bool:
    """Start `svc` unless it already runs. Returns True if it was started now."""
    if svc.pid() is not None:
        progress(f"  {svc.name:<11} already running (pid {svc.pid()})")
        return False
    svc.check_installed()
    process.require_free_port(svc.name, svc.settings.host, svc.port, svc.port_env)
    svc.prepare()
    pid = process.start(svc.spec())
    progress(f"  {svc.name:<11} starting (pid {pid}, log {svc.log})")
    return True


def _await_healthy(svc: Service, progress: Progress) -> None:
    began = time.monotonic()
    ok = waiting.wait_until(svc.healthy, svc.start_timeout_s, alive=lambda: svc.pid() is not None)
    if not ok:
        state = "exited" if svc.pid() is None else f"not healthy after {svc.start_timeout_s:.0f}s"
        raise svc.failure(f"{state} while starting")
    svc.after_start()
    where = describe_endpoint(svc.endpoint())
    progress(f"  {svc.name:<11} healthy in {time.monotonic() - began:.1f}s → {where}")


def describe_endpoint(endpoint: dict[str, Any]) -> str:
    """The one address a person needs, with any password masked."""
    if url := endpoint.get("url") or endpoint.get("bootstrap"):
        return str(url)
    head, _, tail = str(endpoint.get("dsn", "")).partition("@")
    return head.rsplit(":", 1)[0] + ":***@" + tail


def up(settings: Settings, names: list[str] | None = None, progress: Progress = print) -> None:
    """Start what is not running and wait until every chosen service is healthy.

    Independent services start together; a dependent one (Connect) starts as soon as the service
    it needs is healthy, so the slow starters overlap on two cores.
    """
    began = time.monotonic()
    ensure_service_user(settings)
    chosen = _with_dependencies(settings, names)
    independent = [svc for svc in chosen if svc.name not in DEPENDS_ON]
    dependent = [svc for svc in chosen if svc.name in DEPENDS_ON]
    for svc in independent:
        _launch(svc, progress)
    for svc in independent:
        _await_healthy(svc, progress)
        for dep in dependent:
            if DEPENDS_ON[dep.name] == svc.name:
                _launch(dep, progress)
    for dep in dependent:
        _await_healthy(dep, progress)
    progress(f"stack up in {time.monotonic() - began:.1f}s")


def _with_dependencies(settings: Settings, names: list[str] | None) -> list[Service]:
    wanted = {svc.name for svc in services(settings, names)}
    wanted |= {DEPENDS_ON[name] for name in wanted if name in DEPENDS_ON}
    return [svc for svc in services(settings) if svc.name in wanted]


def down(settings: Settings, names: list[str] | None = None, progress: Progress = print) -> None:
    """Stop services in reverse order: TERM (or the service's own signal), wait, then KILL."""
    for svc in reversed(services(settings, names)):
        outcome = process.stop(svc.pidfile, svc.stop_signal, svc.stop_grace_s)
        progress(f"  {svc.name:<11} {outcome}")


def status(settings: Settings) -> dict[str, Any]:
    report: dict[str, Any] = {"home": str(settings.home), "services": {}}
    for svc in services(settings):
        pid = svc.pid()
        healthy = pid is not None and svc.healthy()
        state = "healthy" if healthy else ("starting or unhealthy" if pid else "stopped")
        report["services"][svc.name] = {
            "state": state,
            "pid": pid,
            "log": str(svc.log),
            **svc.endpoint(),
        }
    return report
