"""Load, validate and apply connector JSON through the Connect REST API.

`apply` is all-or-nothing: every file is checked locally (syntax, shape, inline secrets) and then by
Connect's own validate endpoint before any connector is created or updated.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from changelake.capture import source_checks, source_identity, topic_groups
from changelake.capture.capture_restarts import failed_tasks, restart_failed
from changelake.capture.connect_api import ConnectApi, ConnectApiError, quote
from changelake.capture.failures import explain
from changelake.exceptions import ChangelakeError, ConfigError
from changelake.settings import Settings

Progress = Callable[[str], None]
SECRET_WORDS = ("password", "secret", "token")


@dataclass(frozen=True)
class Problem:
    file: Path
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.message}"


@dataclass(frozen=True)
class ConnectorFile:
    path: Path
    name: str
    config: dict[str, str]


def default_files(settings: Settings) -> list[Path]:
    files = sorted(settings.connectors_dir.glob("*.json"))
    if not files:
        raise ConfigError(f"no connector files in {settings.connectors_dir}")
    return files


def load(path: Path) -> tuple[ConnectorFile | None, list[Problem]]:
    """Parse one file and check what can be checked without Connect."""
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        return None, [Problem(path, "file", f"cannot read it ({exc.strerror})")]
    except json.JSONDecodeError as exc:
        return None, [
            Problem(path, f"line {exc.lineno} column {exc.colno}", f"not JSON: {exc.msg}")
        ]
    if not isinstance(doc, dict):
        return None, [Problem(path, "(top level)", 'must be an object {"name": …, "config": {…}}')]
    problems = [
        Problem(path, key, "unknown top-level field")
        for key in doc
        if key not in ("name", "config")
    ]
    name, config = doc.get("name"), doc.get("config")
    if not isinstance(name, str) or not name.strip():
        problems.append(Problem(path, "name", "missing: the connector's name (a string)"))
    if not isinstance(config, dict):
        problems.append(Problem(path, "config", "missing: an object of string settings"))
        return None, problems
    problems += _config_problems(path, name, config)
    if problems:
        return None, problems
    return ConnectorFile(path, str(name), {k: str(v) for k, v in config.items()}), []


def _config_problems(path: Path, name: object, config: dict[str, Any]) -> list[Problem]:
    problems = []
    if not config.get("connector.class"):
        problems.append(Problem(path, "config.connector.class", "missing: which connector to run"))
    if "name" in config and config["name"] != name:
        problems.append(Problem(path, "config.name", f"{config['name']!r} differs from {name!r}"))
    for key, value in config.items():
        if not isinstance(value, str):
            problems.append(
                Problem(
                    path,
                    f"config.{key}",
                    f"must be a string (Connect's form): {json.dumps(str(value))}",
                )
            )
        elif any(w in key.lower() for w in SECRET_WORDS) and value and not value.startswith("${"):
            problems.append(
                Problem(
                    path,
                    f"config.{key}",
                    "secret written inline; use a config provider: ${env:NAME} or ${file:PATH:KEY}",
                )
            )
    return problems


def validate_with_connect(api: ConnectApi, cf: ConnectorFile) -> list[Problem]:
    """Ask Connect (and so the connector itself) whether the configuration is valid."""
    klass = cf.config["connector.class"]
    body = {**cf.config, "name": cf.name}
    try:
        result = api.put(f"/connector-plugins/{quote(klass)}/config/validate", body)
    except ConnectApiError as exc:
        return [Problem(cf.path, "config.connector.class", _unknown_class(api, klass, exc))]
    problems = []
    for entry in result.get("configs", []):
        value = entry.get("value", {})
        for error in value.get("errors", []):
            name = str(value.get("name"))
            if "could not be found" in error and PLUGIN_KEY.fullmatch(name):
                error = _missing_plugin(api, cf.config.get(name, ""), error)
            problems.append(Problem(cf.path, f"config.{name}", error))
    return problems


# Config keys naming a converter or transformation class, which must be installed in Connect.
PLUGIN_KEY = re.compile(r"(key|value|header)\.converter|transforms\.[^.]+\.type")


def _missing_plugin(api: ConnectApi, klass: str, error: str) -> str:
    """Connect's "class could not be found", with where changelake's own plugins come from."""
    if not klass.startswith("dev.changelake."):
        return error
    ours = sorted(
        p["class"]
        for p in api.get("/connector-plugins?connectorsOnly=false")
        if str(p.get("class", "")).startswith("dev.changelake.")
    )
    return (
        f"{error} changelake's Connect plugins are built from connect-smt/ (`make setup` puts "
        f"them on the local Connect's plugin path; under docker compose, `docker compose build "
        f"connect`); this Connect has: {', '.join(ours) or 'none of them'}"
    )


def _unknown_class(api: ConnectApi, klass: str, exc: ConnectApiError) -> str:
    if "Failed to find any class" not in exc.detail:
        return exc.detail
    installed = sorted(p["class"] for p in api.get("/connector-plugins"))
    return f"no installed connector is called {klass!r}; installed: {', '.join(installed)}"


def check(settings: Settings, api: ConnectApi, files: list[Path]) -> list[ConnectorFile]:
    """Every file locally, then by Connect and in its source database; raise listing every
    problem if any."""
    loaded, problems = [], []
    for path in files:
        cf, found = load(path)
        problems += found
        if cf is not None:
            loaded.append(cf)
    problems += _clashes(loaded)
    if not problems:
        registered = source_checks.registered_configs(api)
        problems += _clashes_with_registered(loaded, registered)
        for cf in loaded:
            # The source is checked once Connect accepts the file: Connect's validation already
            # tries the login, and one fault should read as one line.
            refused = validate_with_connect(api, cf) or [
                Problem(cf.path, field, message)
                for field, message in source_checks.problems(
                    settings, cf.name, cf.config, registered
                )
            ]
            problems += refused
    if problems:
        listing = "\n".join(f"  {p}" for p in problems)
        raise ConfigError(
            f"{len(problems)} problem(s) in connector files; nothing was registered:\n{listing}",
            "fix the files above and run `changelake connectors apply` again",
        )
    return loaded


# Settings no two connectors may share: names, slots (one reader each), topic prefixes (their
# tables' topics, lake paths and checkpoints would mix).
_UNIQUE = ("slot.name", "topic.prefix")


def _clashes(loaded: list[ConnectorFile]) -> list[Problem]:
    problems, seen = [], dict[tuple[str, str], ConnectorFile]()
    for cf in loaded:
        for field, value in [("name", cf.name)] + [
            (f"config.{key}", cf.config[key]) for key in _UNIQUE if key in cf.config
        ]:
            other = seen.setdefault((field, value), cf)
            # A slot's name is unique per server only.
            same = field != "config.slot.name" or source_checks.same_server(other.config, cf.config)
            if other is not cf and same:
                problems.append(Problem(cf.path, field, f"{value!r} is also used by {other.path}"))
    return problems


def _clashes_with_registered(
    loaded: list[ConnectorFile], registered: dict[str, dict[str, str]]
) -> list[Problem]:
    """A topic prefix another registered connector writes (a shared slot is the source
    checks': whether two connectors share one depends on their server)."""
    return [
        Problem(
            cf.path,
            "config.topic.prefix",
            f"{cf.config['topic.prefix']!r} is the topic prefix of connector {other}",
        )
        for cf in loaded
        for other, config in sorted(registered.items())
        if other != cf.name
        and cf.config.get("topic.prefix")
        and config.get("topic.prefix") == cf.config["topic.prefix"]
    ]


def apply(
    settings: Settings, files: list[Path], *, timeout_s: float = 120.0, progress: Progress = print
) -> dict[str, str]:
    """Each connector's change: created, updated or unchanged."""
    api = ConnectApi(settings.connect_url)
    connectors = check(settings, api, files)
    restarted: dict[str, str] = {}  # connector → the failure its restart should clear
    changes: dict[str, str] = {}
    for cf in connectors:
        before = api.connector_config(cf.name)
        if before is not None and _same(before, cf):
            changes[cf.name] = "unchanged"
            # A PUT of the same config still restarts the connector and its task ("connector-only
            # config update"): capture would pause, and stop mid-transaction, for nothing. A task
            # that failed is restarted, though: applying the file means capture runs as it says.
            progress(f"  {cf.name:<20} unchanged from {cf.path}")
            restarted[cf.name] = _restart_failed(api, cf.name, progress)
            continue
        api.put(f"/connectors/{quote(cf.name)}/config", cf.config)
        changes[cf.name] = "created" if before is None else "updated"
        progress(f"  {cf.name:<20} {changes[cf.name]} from {cf.path}")
    for cf in connectors:
        wait_running(api, cf.name, timeout_s, progress, restarted.get(cf.name, ""))
        reconcile_topics(settings, cf, progress)
        source_identity.bind(settings, cf.name, cf.config, changes[cf.name] != "unchanged")
    return changes


_NOT_TOPIC_CONFIGS = ("replication.factor", "partitions")


def reconcile_topics(settings: Settings, cf: ConnectorFile, progress: Progress) -> None:
    """Give the table topics that already exist the configs the file asks new ones to get
    (Connect applies `topic.creation.default.*` only when it creates a topic): a file that now
    asks for, say, a longer `min.compaction.lag.ms` must not leave old topics without it."""
    from changelake import kafka_io

    prefix = cf.config.get("topic.prefix", "")
    tables = [t.strip() for t in cf.config.get("table.include.list", "").split(",") if t.strip()]
    existing = set(kafka_io.list_topics(settings.kafka_bootstrap, f"{prefix}."))
    for topic in (f"{prefix}.{t}" for t in tables):
        # The settings of the group Connect created it by (an event table's: uncompacted).
        wanted = topic_groups.creation_settings(cf.config, topic, _NOT_TOPIC_CONFIGS)
        if topic not in existing or not wanted:
            continue
        current = kafka_io.topic_config(settings.kafka_bootstrap, topic)
        differing = {k: v for k, v in wanted.items() if current.get(k) != v}
        if differing:
            kafka_io.set_topic_config(settings.kafka_bootstrap, topic, differing)
            said = ", ".join(f"{k}={v}" for k, v in sorted(differing.items()))
            progress(f"  {topic}: set {said}")


def _restart_failed(api: ConnectApi, name: str, progress: Progress) -> str:
    """Restart the connector's FAILED tasks; the failure they showed ("" if none failed)."""
    status = api.get(f"/connectors/{quote(name)}/status")
    failed = failed_tasks(status)
    if failed:
        restart_failed(api, name)
        for task, why in failed:
            progress(f"  {name:<20} task {task} was FAILED ({why}); restarted it")
    return failure_text(status) if failed else ""


def _same(current: dict[str, str], cf: ConnectorFile) -> bool:
    return {k: v for k, v in current.items() if k != "name"} == cf.config


def wait_running(
    api: ConnectApi, name: str, timeout_s: float, progress: Progress, restarted: str = ""
) -> None:
    """Until the connector and its tasks run; a failure ends the wait at once, except the one a
    restart was just asked to clear (`restarted`): Connect restarts asynchronously, so the
    status read next may still be the old one, and only the deadline says the restart failed."""
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        state = connector_state(api, name)
        summary = f"connector {state['connector']}, tasks {state['tasks'] or 'none yet'}"
        if summary != last:
            progress(f"  {name:<20} {summary}")
            last = summary
        failed = state["failed"]
        if failed and (failed != restarted or time.monotonic() > deadline):
            raise ChangelakeError(*explain(name, failed))
        if (
            state["connector"] == "RUNNING"
            and state["tasks"]
            and set(state["tasks"]) == {"RUNNING"}
        ):
            return
        if time.monotonic() > deadline:
            raise ChangelakeError(
                f"connector {name} not RUNNING after {timeout_s:.0f}s ({summary})",
                "see `changelake connectors status` and Connect's log",
            )
        time.sleep(0.5)


def wait_all_running(settings: Settings, timeout_s: float = 120.0) -> None:
    """Until every registered connector and its tasks run again after Connect restarted. A
    state read early may still be the previous worker's (FAILED included), so only the
    deadline decides that one failed."""
    from changelake.waiting import wait_until

    api = ConnectApi(settings.connect_url)
    states: dict[str, dict[str, Any]] = {}

    def running() -> bool:
        # Listed afresh on every read: right after a restart Connect may still list a connector
        # deleted long ago (seen after a config-topic replay) and drop it a moment later.
        names: list[str] = api.get("/connectors")
        states.clear()
        states.update({name: connector_state(api, name) for name in names})
        return all(
            st["connector"] == "RUNNING" and st["tasks"] and set(st["tasks"]) == {"RUNNING"}
            for st in states.values()
        )

    if not wait_until(running, timeout_s):
        stuck = {n: st for n, st in states.items() if st["failed"] or st["connector"] != "RUNNING"}
        raise ChangelakeError(
            f"connectors not RUNNING {timeout_s:.0f}s after Connect restarted: "
            + "; ".join(
                explain(n, st["failed"])[0] if st["failed"] else f"{n}: {st['connector']}"
                for n, st in stuck.items()
            ),
            "see `changelake connectors status` and logs/connect.log",
        )


def connector_state(api: ConnectApi, name: str) -> dict[str, Any]:
    try:
        status = api.get(f"/connectors/{quote(name)}/status")
    except ConnectApiError as exc:
        if exc.status == 404:  # just created; the status arrives a moment later
            return {"connector": "PENDING", "tasks": [], "failed": ""}
        raise
    return {
        "connector": status["connector"]["state"],
        "tasks": [t["state"] for t in status.get("tasks", [])],
        "failed": failure_text(status),
    }


def failure_text(status: dict[str, Any]) -> str:
    """The traces of a connector status's FAILED parts ("" when nothing failed)."""
    connector = status["connector"]
    failed = [connector.get("trace", "")] if connector["state"] == "FAILED" else []
    failed += [t.get("trace", "") for t in status.get("tasks", []) if t["state"] == "FAILED"]
    return "\n".join(failed)
