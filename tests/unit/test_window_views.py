"""Event-time windows against a replay of the same changes one by one, as a stream processor
with a watermark would see them: each change moves its row between windows, a change reaching a
window the watermark has passed is counted as late and never changes the window's figures; and
sessions against the table's rows grouped by hand."""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pyspark.sql import SparkSession

from changelake.views.history import history_view
from changelake.views.window_config import parse_event_time
from changelake.views.windows import sessions, windows

STORED = (
    "id long, customer long, placed timestamp, total long, _cdc_op string, _cdc_lsn long, "
    "_cdc_source_ts timestamp, _kafka_partition int, _kafka_offset long"
)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
LATENESS = 120


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def naive(seconds: int) -> datetime:
    return at(seconds).replace(tzinfo=None)  # as PySpark collects a timestamp (UTC session)


def changes(seed: int) -> list[tuple[str, int | None, int | None, int | None, int | None, int]]:
    """(op, id, customer, event second, total, LSN): times mostly rising, some far behind."""
    rnd, live, out = random.Random(seed), set(), []
    for lsn in range(1, 120):
        if rnd.random() < 0.02:
            out.append(("t", None, None, None, None, lsn))
            live.clear()
            continue
        k = rnd.randrange(25)
        if k in live and rnd.random() < 0.2:
            out.append(("d", k, None, None, None, lsn))
            live.discard(k)
            continue
        behind = rnd.choice([0, 0, 0, 30, 100, 400])  # out of order; 400 s is past lateness
        second = lsn * 20 - behind + rnd.randrange(10)
        out.append(
            ("u" if k in live else "c", k, rnd.randrange(4), second, rnd.randrange(1, 50), lsn)
        )
        live.add(k)
    return out


def replayed(events: list[Any], size: int, slide: int) -> dict[tuple[Any, ...], list[int]]:
    """Per window (start, end): [events, revenue, late, late_events, late_revenue]."""
    rows: dict[int, tuple[int, int]] = {}
    seen: int | None = None
    out: dict[tuple[Any, ...], list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    for op, k, _, second, total, _ in events:
        mark = seen - LATENESS if seen is not None else None
        moves = []
        for gone in list(rows) if op == "t" else [k] if k in rows else []:
            moves.append((-1, *rows.pop(gone)))
        if op in "cu":
            rows[k] = (second, total)
            moves.append((1, second, total))
        for sign, t, value in moves:
            for start in range((t - size) // slide * slide + slide, t + 1, slide):
                if not start <= t < start + size:
                    continue
                figures = out[(naive(start), naive(start + size))]
                if mark is not None and start + size <= mark:
                    figures[2] += 1
                    figures[3] += sign
                    figures[4] += sign * value
                else:
                    figures[0] += sign
                    figures[1] += sign * value
        if op in "cu":
            seen = second if seen is None else max(seen, second)
    return out


def stored(spark: SparkSession, events: list[Any]) -> Any:
    frame = spark.createDataFrame(
        [
            (k, c, at(s) if s is not None else None, v, op, lsn, at(lsn), 0, lsn)
            for op, k, c, s, v, lsn in events
        ],
        STORED,
    )
    truncates = [(lsn, at(lsn)) for op, *_, lsn in events if op == "t"]
    return history_view(frame, ["id"], truncates)


@pytest.mark.parametrize(("seed", "size", "slide"), [(1, 60, 60), (2, 60, 60), (3, 300, 60)])
def test_windows_are_the_changes_replayed_with_a_watermark(
    spark: SparkSession, seed: int, size: int, slide: int
) -> None:
    events = changes(seed)
    spec = parse_event_time(
        "views.json: views.w",
        "window",
        {"time": "placed", "size": f"{size} seconds", "slide": f"{slide} seconds",
         "lateness": f"{LATENESS} seconds", "sum": {"revenue": "total"}},
    )  # fmt: skip
    got = {
        (r["window_start"], r["window_end"]): [
            r["events"], r["revenue"], r["late"], r["late_events"], r["late_revenue"]
        ]
        for r in windows(stored(spark, events), spec).collect()
    }  # fmt: skip
    want = replayed(events, size, slide)
    assert got == dict(want)
    assert any(figures[2] for figures in want.values())  # some changes came late


def test_sessions_are_each_customers_rows_no_more_than_the_gap_apart(spark: SparkSession) -> None:
    events = changes(4)
    spec = parse_event_time(
        "views.json: views.s",
        "session",
        {"time": "placed", "by": ["customer"], "gap": "45 seconds", "sum": {"revenue": "total"}},
    )
    rows: dict[int, tuple[int, int, int]] = {}
    for op, k, customer, second, total, _ in events:
        if op == "t":
            rows.clear()
        elif op == "d":
            rows.pop(k, None)
        else:
            rows[k] = (customer, second, total)
    want = []
    for customer in {c for c, _, _ in rows.values()}:
        times = sorted((s, v) for c, s, v in rows.values() if c == customer)
        group = [times[0]]
        for s, v in [*times[1:], (None, None)]:
            if s is not None and s - group[-1][0] <= 45:
                group.append((s, v))
                continue
            start, end = group[0][0], group[-1][0] + 45
            want.append((customer, naive(start), naive(end), len(group), sum(v for _, v in group)))
            group = [(s, v)]
    got = sessions(stored(spark, events), spec).collect()
    assert sorted(tuple(r)[:5] for r in got) == sorted(want)
