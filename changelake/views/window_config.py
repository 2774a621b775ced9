"""Event-time views' declarations (views.json): `kind: window` (tumbling, or hopping with a
`slide`) and `kind: session` (per `by` key, a new session after a `gap`), both over a table's
`time` column, with a `lateness` the watermark allows and `sum`s of value columns.

    "revenue_per_minute": {"kind": "window", "table": "orders", "time": "placed_at",
      "size": "1 minute", "lateness": "5 minutes", "sum": {"revenue": "total"}}
    "customer_sessions": {"kind": "session", "table": "orders", "time": "placed_at",
      "by": ["customer_id"], "gap": "30 minutes", "sum": {"revenue": "total"}}
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from changelake.exceptions import ConfigError

WINDOW_FIELDS = {"kind", "table", "time", "size", "slide", "lateness", "sum"}
SESSION_FIELDS = {"kind", "table", "time", "by", "gap", "lateness", "sum"}
_DURATION = re.compile(r"(\d+) (second|minute|hour|day)s?")
_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}


@dataclass(frozen=True)
class EventTime:
    time: str  # the event-time column
    lateness_s: int  # how far behind the newest event time a window still takes changes
    sums: tuple[tuple[str, str], ...]  # (view column, value column summed)
    size_s: int = 0  # a window's length (kind window)
    slide_s: int = 0  # how often a window starts: size_s for tumbling windows
    by: tuple[str, ...] = ()  # whose activity a session is (kind session)
    gap_s: int = 0  # the quiet time that ends a session


def parse_event_time(where: str, kind: str, spec: dict[str, Any]) -> EventTime:
    time = spec.get("time")
    if not isinstance(time, str) or not time:
        raise ConfigError(f"{where}.time: the table's event-time column (a timestamp), by name")
    sums = spec.get("sum", {})
    if not isinstance(sums, dict) or not all(
        isinstance(k, str) and k and isinstance(v, str) and v for k, v in sums.items()
    ):
        raise ConfigError(
            f'{where}.sum: an object from the view\'s names to value columns, like {{"revenue": '
            '"total"}'
        )
    lateness = seconds(f"{where}.lateness", spec.get("lateness", "0 seconds"), zero=True)
    if kind == "window":
        size = seconds(f"{where}.size", spec.get("size"))
        slide = seconds(f"{where}.slide", spec.get("slide", spec.get("size")))
        if slide > size:
            raise ConfigError(f"{where}.slide: longer than size: events between windows are lost")
        return EventTime(time, lateness, tuple(sums.items()), size_s=size, slide_s=slide)
    by = spec.get("by")
    if not isinstance(by, list) or not by or not all(isinstance(c, str) and c for c in by):
        raise ConfigError(
            f'{where}.by: the columns whose activity a session is, like ["customer_id"]'
        )
    gap = seconds(f"{where}.gap", spec.get("gap"))
    return EventTime(time, lateness, tuple(sums.items()), by=tuple(by), gap_s=gap)


def seconds(where: str, text: object, zero: bool = False) -> int:
    found = _DURATION.fullmatch(text.strip()) if isinstance(text, str) else None
    if found is None or (int(found.group(1)) == 0 and not zero):
        least = "0" if zero else "1"
        raise ConfigError(
            f'{where}: a duration like "1 minute" or "30 minutes" (seconds, minutes, hours or '
            f"days; at least {least})"
        )
    return int(found.group(1)) * _SECONDS[found.group(2)]
