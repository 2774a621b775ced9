"""The history view (SCD type 2) against a replay of the same changes one by one: each version
valid from its change to the key's next change or the next truncate, deletes closing versions,
replayed rows counted once; and unchanged-TOAST values carried within a batch, never across a
delete."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pyspark.sql import SparkSession

from changelake.views.history import carried, history_view

STORED = (
    "id long, v string, _cdc_op string, _cdc_lsn long, _cdc_source_ts timestamp, "
    "_kafka_partition int, _kafka_offset long"
)
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def ts(lsn: int) -> datetime:
    return T0 + timedelta(seconds=lsn)


def changes(seed: int) -> list[tuple[str, int | None, str | None, int]]:
    """(op, key, value, lsn) in LSN order; a truncate has no key."""
    rnd, alive, out = random.Random(seed), set(), []
    for lsn in range(1, 80):
        if rnd.random() < 0.04:
            out.append(("t", None, None, lsn))
            alive.clear()
            continue
        k = rnd.randrange(6)
        if k in alive and rnd.random() < 0.3:
            out.append(("d", k, None, lsn))
            alive.discard(k)
        else:
            out.append(("u" if k in alive else rnd.choice("cr"), k, f"v{lsn}", lsn))
            alive.add(k)
    return out


def naive(lsn: int) -> datetime:
    """As PySpark collects a timestamp (the session and this process are in UTC)."""
    return ts(lsn).replace(tzinfo=None)


def expected(events: list[tuple[str, int | None, str | None, int]]) -> list[tuple[Any, ...]]:
    opened: dict[int, list[Any]] = {}
    done = []
    for op, k, v, lsn in events:
        closing = list(opened) if op == "t" else [k] if k in opened else []
        for key in closing:
            version = opened.pop(key)
            done.append((*version, lsn, naive(lsn), False))
        if op in "cur" and k is not None:
            opened[k] = [k, v, op, lsn, naive(lsn)]
    done += [(*version, None, None, True) for version in opened.values()]
    return sorted(done, key=lambda r: (r[0], r[3]))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_versions_are_the_changes_replayed_one_by_one(spark: SparkSession, seed: int) -> None:
    events = changes(seed)
    stored = [(k, v, op, lsn, ts(lsn), 0, lsn) for op, k, v, lsn in events]
    stored += random.Random(seed).sample(stored, 5)  # a batch replayed after a crash
    frame = spark.createDataFrame(stored, STORED)
    truncates = [(lsn, ts(lsn)) for op, _, _, lsn in events if op == "t"]
    view = history_view(frame, ["id"], truncates)
    got = sorted((tuple(r) for r in view.collect()), key=lambda r: (r[0], r[3]))
    assert got == expected(events)
    assert view.columns == [
        "id", "v", "_cdc_op", "_valid_from_lsn", "_valid_from", "_valid_to_lsn", "_valid_to",
        "_current",
    ]  # fmt: skip


def test_unchanged_toast_takes_the_keys_previous_value_in_the_batch(spark: SparkSession) -> None:
    rows = [
        (1, "a", "c", 1, []),
        (1, None, "u", 2, ["v"]),  # → a
        (1, None, "d", 3, []),
        (1, "b", "c", 4, []),
        (1, None, "u", 5, ["v"]),  # → b, not a (the delete came between)
        (2, None, "u", 6, ["v"]),  # nothing earlier in the batch: stays open
    ]
    frame = spark.createDataFrame(
        [(k, v, op, lsn, 0, lsn, t) for k, v, op, lsn, t in rows],
        "id long, v string, _cdc_op string, _cdc_lsn long, _kafka_partition int, "
        "_kafka_offset long, _toasted array<string>",
    )
    got = sorted(
        tuple(r)
        for r in carried(frame, ["id"], ["v"]).select("id", "_cdc_lsn", "v", "_toasted").collect()
    )
    assert got == [
        (1, 1, "a", []),
        (1, 2, "a", []),
        (1, 3, None, []),
        (1, 4, "b", []),
        (1, 5, "b", []),
        (2, 6, None, ["v"]),
    ]


def test_a_row_re_sent_unchanged_is_no_new_version(spark: SparkSession) -> None:
    """A repair or a column added with a DEFAULT has Debezium re-send rows (`r`): one equal to
    its key's version before it changes nothing; one that differs, or follows a delete or a
    truncate, is a version."""
    stored = [
        (4, "y", "c", 1), (4, "y", "r", 3),  # the truncate at 2 ended its version
        (1, "a", "c", 4), (1, "a", "r", 5),  # re-sent unchanged: no version
        (2, "b", "c", 6), (2, "B", "r", 7),  # re-sent with a value the topic lacked
        (3, "x", "c", 8), (3, None, "d", 9), (3, "x", "r", 10),  # back after a delete
    ]  # fmt: skip
    frame = spark.createDataFrame([(k, v, op, n, ts(n), 0, n) for k, v, op, n in stored], STORED)
    view = history_view(frame, ["id"], [(2, ts(2))])
    got = sorted(
        (r["id"], r["v"], r["_valid_from_lsn"], r["_valid_to_lsn"]) for r in view.collect()
    )
    assert got == [
        (1, "a", 4, None),
        (2, "B", 7, None), (2, "b", 6, 7),
        (3, "x", 8, 9), (3, "x", 10, None),
        (4, "y", 1, 2), (4, "y", 3, None),
    ]  # fmt: skip
