"""A stream-stream interval join's declaration (views.json, `kind: interval_join`): per key of
`table`, its first change that makes `first.when` true, paired with its first later change that
makes `second.when` true within `within` of it, by their event times.

    "time_to_ship": {"kind": "interval_join", "table": "orders",
      "first": {"when": "status = 'pending'", "time": "placed_at"},
      "second": {"when": "status = 'shipped'", "time": "updated_at"},
      "within": "1 hour", "lateness": "5 minutes"}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from changelake.exceptions import ConfigError
from changelake.views.window_config import seconds

FIELDS = {"kind", "table", "first", "second", "within", "lateness"}


@dataclass(frozen=True)
class Event:
    when: str  # a Spark SQL condition on the row as a change left it (and `_cdc_op`)
    time: str  # the event-time column


@dataclass(frozen=True)
class IntervalJoin:
    first: Event
    second: Event
    within_s: int
    lateness_s: int


def parse_interval_join(where: str, spec: dict[str, Any]) -> IntervalJoin:
    events = [_event(f"{where}.{side}", spec.get(side)) for side in ("first", "second")]
    within = seconds(f"{where}.within", spec.get("within"))
    lateness = seconds(f"{where}.lateness", spec.get("lateness", "0 seconds"), zero=True)
    return IntervalJoin(events[0], events[1], within, lateness)


def _event(where: str, doc: object) -> Event:
    example = """{"when": "status = 'shipped'", "time": "updated_at"}"""
    if not isinstance(doc, dict):
        raise ConfigError(f"{where}: must be an object like {example}")
    unknown = sorted(set(doc) - {"when", "time"})
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown field (known: when, time)")
    when, time = doc.get("when"), doc.get("time")
    if not isinstance(when, str) or not when.strip():
        raise ConfigError(f"{where}.when: a Spark SQL condition on the row, like {example}")
    if not isinstance(time, str) or not time:
        raise ConfigError(f"{where}.time: the event-time column (a timestamp), by name")
    return Event(when, time)
