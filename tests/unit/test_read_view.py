"""Merge-on-read: the base table ⊕ its changelog equals the table the changes make when applied
one by one, wherever compaction drew its line, for deletes, truncates, replays and soft deletes.
With a local Spark session and no services."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest
from pyspark.sql import SparkSession

from changelake.changelog.plan import Truncate
from changelake.lake.current_rows import current_rows, newest_changes

BASE = "id long, v string, _cdc_lsn long, _cdc_op string, _cdc_source_ts timestamp"
SOFT = BASE + ", _cdc_deleted boolean, _cdc_deleted_at timestamp"
CHANGELOG = BASE + ", _kafka_partition int, _kafka_offset long"
Event = tuple[str, int | None, str | None, int]  # op, key, value, LSN


def ts(lsn: int) -> datetime:
    return datetime.fromtimestamp(lsn, UTC).replace(tzinfo=None)


def events(seed: int, count: int = 60, keys: int = 8) -> list[Event]:
    rng = random.Random(seed)
    out: list[Event] = []
    for i in range(count):
        lsn = 100 + 10 * i
        roll = rng.random()
        if roll < 0.04:
            out.append(("t", None, None, lsn))
        else:
            op = "d" if roll < 0.3 else rng.choice("cu")
            out.append((op, rng.randrange(keys), None if op == "d" else f"v{i}", lsn))
    return out


def apply(changes: list[Event], soft: bool) -> dict[int, tuple[Any, ...]]:
    """The table the changes make, one by one: key → (v, lsn, op, deleted, deleted_at)."""
    table: dict[int, tuple[Any, ...]] = {}
    for op, key, value, lsn in changes:
        if op == "t":
            for k, row in list(table.items()):
                if not soft:
                    del table[k]
                elif not row[3]:
                    table[k] = (*row[:3], True, ts(lsn))
        elif op == "d":
            assert key is not None
            if not soft:
                table.pop(key, None)
            elif key in table:
                table[key] = (table[key][0], lsn, "d", True, ts(lsn))
        else:
            assert key is not None
            table[key] = (value, lsn, op, False, None)
    return table


def rows(table: dict[int, tuple[Any, ...]], soft: bool) -> list[tuple[Any, ...]]:
    out = []
    for k, (v, lsn, op, deleted, at) in table.items():
        row = (k, v, lsn, op, ts(lsn))
        out.append((*row, deleted, at) if soft else row)
    return sorted(out)


@pytest.mark.parametrize("soft", [False, True])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_base_plus_changelog_equals_the_changes_applied_one_by_one(
    spark: SparkSession, seed: int, soft: bool
) -> None:
    changes = events(seed)
    line = random.Random(seed).randrange(len(changes))  # where compaction got to
    base = apply(changes[:line], soft)
    # The changelog as the append writes it: for a soft-deleting table a delete carries the row
    # it deletes, and a delete of a key the table never had is not written.
    state: dict[int, Any] = {k: r[0] for k, r in base.items()}
    log = []
    for offset, (op, key, value, lsn) in enumerate(changes[line:]):
        if op == "d" and soft:
            if key not in state:
                continue
            value = state[key]
        if key is not None:
            state[key] = value
        log.append((key, value, lsn, op, ts(lsn), 0, line + offset))
    # A replay of changes the base already holds (a key it has at a newer LSN) changes nothing.
    replayed = [e for e in changes[:line] if e[1] in base and e[0] != "t" and e[3] < base[e[1]][1]]
    log += [(k, v, lsn, op, ts(lsn), 0, i) for i, (op, k, v, lsn) in enumerate(replayed[:3])]

    last = max((lsn for op, _, _, lsn in changes[line:] if op == "t"), default=None)
    truncate = None if last is None else Truncate(last, ts(last))
    base_frame = spark.createDataFrame(rows(base, soft), SOFT if soft else BASE)
    log_frame = spark.createDataFrame(log, CHANGELOG)
    view = current_rows(base_frame, log_frame, ["id"], truncate, soft)
    assert sorted(tuple(r) for r in view.collect()) == rows(apply(changes, soft), soft)
    # With the changelog's newest changes computed once and cached (the served views' way).
    cached = newest_changes(log_frame, ["id"]).persist()
    again = current_rows(base_frame, log_frame, ["id"], truncate, soft, cached)
    assert sorted(tuple(r) for r in again.collect()) == rows(apply(changes, soft), soft)
    cached.unpersist()


def test_an_empty_changelog_shows_the_base_table(spark: SparkSession) -> None:
    base = spark.createDataFrame([(1, "a", 5, "r", ts(5))], BASE)
    view = current_rows(base, spark.createDataFrame([], CHANGELOG), ["id"])
    assert [tuple(r) for r in view.collect()] == [(1, "a", 5, "r", ts(5))]
