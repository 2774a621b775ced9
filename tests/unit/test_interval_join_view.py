"""The interval join (placed → shipped within a bound) against a replay of the same changes one
by one: the first change per key that places it paired with its first later change that ships
it within the bound; unmatched ones expire when the watermark passes the deadline, and a match
that arrived after that is marked late."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql import SparkSession

from changelake.views.history import history_view
from changelake.views.interval_config import parse_interval_join
from changelake.views.interval_join import interval_join

STORED = (
    "id long, status string, placed timestamp, updated timestamp, _cdc_op string, "
    "_cdc_lsn long, _cdc_source_ts timestamp, _kafka_partition int, _kafka_offset long"
)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
WITHIN, LATENESS = 300, 60
NEXT = {"pending": "paid", "paid": "shipped", "shipped": "delivered", "delivered": "delivered"}


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def naive(seconds: int | None) -> datetime | None:
    return at(seconds).replace(tzinfo=None) if seconds is not None else None


def test_pairs_are_the_changes_replayed_with_a_watermark(spark: SparkSession) -> None:
    rnd = random.Random(5)
    rows: dict[int, list[Any]] = {}  # id → [status, placed, updated]
    stored, versions = [], []  # versions: (lsn, id, status, placed, updated)
    for lsn in range(1, 200):
        k = rnd.randrange(30)
        now = lsn * 10 - rnd.choice([0, 0, 0, 40, 500])  # some event times far behind
        if k not in rows:
            rows[k] = ["pending", now, now]
            op = "c"
        elif rnd.random() < 0.05:
            del rows[k]
            stored.append((k, None, None, None, "d", lsn, at(lsn), 0, lsn))
            continue
        else:
            rows[k] = [NEXT[rows[k][0]], rows[k][1], max(now, rows[k][1])]
            op = "u"
        status, placed, updated = rows[k]
        stored.append((k, status, at(placed), at(updated), op, lsn, at(lsn), 0, lsn))
        versions.append((lsn, k, status, placed, updated))
    want = {}
    newest = max(max(p, u) for _, _, _, p, u in versions)
    for k in {v[1] for v in versions}:
        mine = [v for v in versions if v[1] == k]
        first = next((v for v in mine if v[2] == "pending"), None)
        if first is None:
            continue
        deadline = first[3] + WITHIN
        second = next(
            (
                v
                for v in mine
                if v[0] > first[0] and v[2] == "shipped" and first[3] <= v[4] <= deadline
            ),
            None,
        )
        if second is None:
            state = "expired" if newest - LATENESS >= deadline else "open"
            want[k] = (naive(first[3]), None, None, state, False)
            continue
        seen = [max(p, u) for lsn, _, _, p, u in versions if lsn < second[0]]
        late = bool(seen) and max(seen) - LATENESS >= deadline
        seconds = float(second[4] - first[3])
        want[k] = (naive(first[3]), naive(second[4]), seconds, "matched", late)
    spec = parse_interval_join(
        "views.json: views.ship",
        {
            "first": {"when": "status = 'pending'", "time": "placed"},
            "second": {"when": "status = 'shipped'", "time": "updated"},
            "within": f"{WITHIN} seconds",
            "lateness": f"{LATENESS} seconds",
        },
    )
    frame = spark.createDataFrame(stored, STORED)
    got = interval_join(history_view(frame, ["id"], []), ["id"], spec).collect()
    assert {r["id"]: tuple(r)[1:] for r in got} == want
    assert any(late for *_, late in want.values()) and any(
        s == "expired" for *_, s, _ in want.values()
    )
