"""Whether capture runs: the tables a connector feeds are `stalled` while it or one of its tasks
is not RUNNING, or while its heartbeats stopped although its source moves on.

Nothing reaches Kafka then, so the Spark side has nothing to fail on: each table's stream stays
`running`, its lag 0 records, while the source moves on without it (a dropped replication slot
fails Debezium's task with "no longer available on the server" and no derived table notices).
`status`, the run's state file, its log and `/metrics` read this so that a pipeline never looks
healthy while it captures nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException

from changelake import kafka_io
from changelake.capture.connect_api import ConnectApi
from changelake.capture.failures import explain
from changelake.exceptions import ChangelakeError, first_line

# Debezium writes a heartbeat record every heartbeat.interval.ms while it streams (its
# heartbeat.action.query makes the source move on even when nothing else does). This many
# intervals without one, and never less than STALE_MIN_S, is capture stopped rather than slow:
# a task restart, or a source busy with a bulk load, takes well under that.
STALE_INTERVALS = 6
STALE_MIN_S = 120.0


@dataclass(frozen=True)
class Stall:
    """Why a connector captures nothing, in one sentence, and what to do."""

    connector: str
    sentence: str
    next_step: str
    cause: str = "connector"  # a word for /metrics: connector, heartbeat, or slot_trouble's

    def __str__(self) -> str:
        return f"{self.sentence}: {self.next_step}"


def stall_of(name: str, status: Mapping[str, Any] | None) -> Stall | None:
    """The stall Connect's status of connector `name` shows (None: it and each task RUNNING).
    `status`: the body of GET /connectors/NAME/status; None when Connect does not know it."""
    if status is None:
        return Stall(
            name,
            f"connector {name} is not registered with Kafka Connect, so nothing captures its"
            " tables",
            "`changelake connectors apply` registers it",
        )
    connector = status.get("connector") or {}
    tasks = [t for t in status.get("tasks") or [] if isinstance(t, dict)]
    failed = [t for t in tasks if t.get("state") == "FAILED"]
    if connector.get("state") == "FAILED" or failed:
        trace = str((failed[0] if failed else connector).get("trace") or "")
        sentence, next_step = explain(name, trace)
        return Stall(name, sentence, next_step)
    if connector.get("state") != "RUNNING":
        state = connector.get("state", "in no state")
        return Stall(
            name,
            f"connector {name} is {state}, so nothing captures its tables",
            f"resume it (PUT /connectors/{name}/resume on Kafka Connect) or `changelake"
            " connectors apply`",
        )
    idle = [t for t in tasks if t.get("state") != "RUNNING"]
    if not tasks or idle:
        which = f"task {idle[0].get('id')} is {idle[0].get('state')}" if idle else "no task runs"
        return Stall(
            name,
            f"connector {name} runs but {which}, so nothing captures its tables",
            "`changelake connectors status` shows its tasks; Connect's log says why a task did"
            " not start",
        )
    return None


def stale_heartbeat(name: str, interval_s: float, age_s: float | None) -> Stall | None:
    """A stall when Debezium's newest heartbeat (`age_s` old; None: it never wrote one) is older
    than STALE_INTERVALS heartbeat intervals and STALE_MIN_S."""
    limit = max(STALE_INTERVALS * interval_s, STALE_MIN_S)
    if age_s is None or age_s <= limit:
        return None
    return Stall(
        name,
        f"connector {name} reports RUNNING but wrote no heartbeat for {age_s:.0f}s (it writes"
        f" one every {interval_s:g}s while it streams), so its tables are stale",
        "`changelake connectors status` and Connect's log say where its task stands; restarting"
        f" it (POST /connectors/{name}/restart?includeTasks=true) starts capture again",
        "heartbeat",
    )


def capture_stalls(
    connect_url: str,
    bootstrap: str,
    connectors: Iterable[str],
    problems: list[str],
    clock: Callable[[], float] = time.time,
) -> dict[str, Stall]:
    """Per connector that captures nothing, why (one read of Connect, then each running
    connector's newest heartbeat). Connect not answering is a problem entry and no stall: the
    tables' capture is unknown, not known to be stopped."""
    try:
        found = ConnectApi(connect_url, timeout_s=10.0).get("/connectors?expand=status&expand=info")
    except ChangelakeError as exc:
        problems.append(f"connect: {first_line(exc)}: whether capture runs is unknown")
        return {}
    stalls = {}
    for name in sorted(set(connectors)):
        item = found.get(name)
        stall = stall_of(name, item["status"] if item else None)
        if stall is None and item:
            stall = _heartbeat_stall(bootstrap, name, item["info"].get("config") or {}, clock())
        if stall is not None:
            stalls[name] = stall
    return stalls


def _heartbeat_stall(
    bootstrap: str, name: str, config: Mapping[str, str], now: float
) -> Stall | None:
    """A stall when a connector with heartbeats has written none for too long."""
    interval_ms = config.get("heartbeat.interval.ms", "0")
    if not interval_ms.isdigit() or int(interval_ms) == 0:
        return None  # no heartbeats: a quiet source and a stopped capture look alike
    prefix = config.get("topic.heartbeat.prefix", "__debezium-heartbeat")
    topic = f"{prefix}.{config.get('topic.prefix', '')}"
    try:
        if topic not in kafka_io.list_topics(bootstrap, topic):
            return None  # it never streamed yet
        marks = kafka_io.watermarks(bootstrap, topic)
        newest = [
            kafka_io.fetch_one(bootstrap, topic, p, high - 1, timeout_s=5).timestamp_ms
            for p, (low, high) in marks.items()
            if high > low
        ]
    except (ChangelakeError, KafkaException):  # Kafka away or slow: no figure
        return None
    stamps = [t for t in newest if t is not None]
    if not stamps:
        return None
    return stale_heartbeat(name, int(interval_ms) / 1000, now - max(stamps) / 1000)


def problem_lines(stalls: Mapping[str, Stall], connector_of: Mapping[str, str]) -> list[str]:
    """One line per stalled connector, naming the tables that stopped moving."""
    lines = []
    for name, stall in sorted(stalls.items()):
        tables = sorted(t for t, c in connector_of.items() if c == name)
        lines.append(
            f"capture stalled: {stall.sentence}; tables {', '.join(tables)} get no changes:"
            f" {stall.next_step}"
        )
    return lines
