"""Every batch's merge-on-write leaves the base table equal to the changes applied one by one,
for deletes, truncates, soft deletes and replays; a write repeated under its transaction id is
skipped whole, and one replayed by another writer changes nothing (the LSN guard). A local
Spark session and Delta tables under tmp_path; no services."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from changelake.changelog.plan import Truncate
from changelake.lake.commits import CommitMeta
from changelake.lake.table import read_table
from changelake.sinks.delta import DeltaSink
from changelake.sinks.delta_jvm import DeltaJvm
from changelake.sinks.merge_on_write import BASE_PROPERTIES

BASE = "id long, v string, _cdc_lsn long, _cdc_op string, _cdc_source_ts timestamp"
SOFT = BASE + ", _cdc_deleted boolean, _cdc_deleted_at timestamp"
Event = tuple[str, int | None, str | None, int]  # op, key, value, LSN
# Delta keeps a version's checksum in memory after its own commit (incremental commit) as well as
# writing it beside the version: both off, the table's state is rebuilt to read its files.
CHECKSUM_SETTINGS = (
    "spark.databricks.delta.writeChecksumFile.enabled",
    "spark.databricks.delta.incremental.commit.enabled",
)
BATCH = 5  # changes per batch


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


def batch_rows(batch: list[Event], state: dict[int, Any], soft: bool) -> list[Any]:
    """What the applier writes for one batch: the newest change per key after the batch's
    truncate, complete: a soft delete carries the row it deletes (a delete of a key the table
    lacks: not written)."""
    last = max((lsn for op, _, _, lsn in batch if op == "t"), default=None)
    if last is not None and not soft:  # a soft-deleting table keeps the wiped rows, marked
        state.clear()
    newest: dict[int, Any] = {}
    for op, key, value, lsn in batch:
        if op == "t" or (last is not None and lsn < last):
            continue
        assert key is not None
        if op == "d" and soft:
            if key not in state:
                continue
            value = state[key]
        if op == "d" and not soft:
            state.pop(key, None)
        else:
            state[key] = value
        newest[key] = (key, value, lsn, op, ts(lsn))
    return list(newest.values())


@pytest.mark.parametrize(("soft", "checksums"), [(False, True), (True, True), (False, False)])
def test_every_write_leaves_the_table_the_changes_make(
    spark: SparkSession, tmp_path: Path, soft: bool, checksums: bool, request: Any
) -> None:
    """`checksums`: whether Delta writes a checksum file beside each version, from which
    merge-on-write reads the table's files and transaction ids; without one (another writer's
    table, a crash between commit and checksum, too many files to list) it reads them from
    Delta's rebuilt state."""
    for name in () if checksums else CHECKSUM_SETTINGS:
        spark.conf.set(name, "false")
        request.addfinalizer(lambda name=name: spark.conf.unset(name))
    base = DeltaSink(spark, str(tmp_path / "t"), "public.t", soft)
    changes = events(7, count=40)
    seed = changes[:5]
    snapshot = spark.createDataFrame(rows(apply(seed, soft), soft), SOFT if soft else BASE)
    snapshot.write.format("delta").option(
        "userMetadata", CommitMeta("snapshot", "p.public.t", {"0": 5}, 140, None, ("id",)).to_json()
    ).save(base.path)

    state: dict[int, Any] = {k: r[0] for k, r in apply(seed, soft).items()}
    for version, start in enumerate(range(5, len(changes), BATCH), start=1):
        batch = changes[start : start + BATCH]
        done = start + len(batch)
        last = max((lsn for op, _, _, lsn in batch if op == "t"), default=None)
        truncate = None if last is None else Truncate(last, ts(last))
        meta = CommitMeta("apply", "p.public.t", {"0": done}, batch[-1][3], None, ("id",))
        written = spark.createDataFrame(batch_rows(batch, state, soft), BASE)
        assert base.write_changes(written, ("id",), truncate, meta, "app", version)
        want = rows(apply(changes[:done], soft), soft)
        assert sorted(tuple(r) for r in read_table(spark, base.path, soft).rows.collect()) == want
        # The same write again (a second run that read the same offsets): skipped whole.
        assert not base.write_changes(written, ("id",), truncate, meta, "app", version)
        if version % 3 == 0:  # replayed by another writer: committed, and no row changes
            assert base.write_changes(written, ("id",), None, meta, "other", version)
            stored = spark.read.format("delta").load(base.path)
            assert sorted(tuple(r) for r in stored.collect()) == want
    jvm = DeltaJvm(spark)
    assert jvm.transaction(base.path).snapshot().checksumOpt().isDefined() == checksums
    # Made by a plain write, as before deletion vectors and seldom checkpoints were the rule for
    # base tables: the first write gave it both.
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{base.path}`").first()
    assert detail is not None
    assert {k: detail["properties"].get(k) for k in BASE_PROPERTIES} == BASE_PROPERTIES


def test_a_write_number_another_run_took_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    """Two runs on one lake whose batches began at different offsets reach the same write
    number: the second is refused (the table then starts again from its commits), never
    taken as written while its changes are not."""
    from changelake.apply.batch_sinks import AppliedBatch, Base
    from changelake.apply.batch_stats import BatchStats
    from changelake.exceptions import RetryableError

    base = DeltaSink(spark, str(tmp_path / "t"), "t")
    meta = CommitMeta("snapshot", "p.public.t", {"0": 1}, 100, None, ("id",))
    spark.createDataFrame([(1, "a", 100, "r", ts(100))], BASE).write.format("delta").option(
        "userMetadata", meta.to_json()
    ).save(base.path)
    ours = spark.createDataFrame([(2, "b", 110, "c", ts(110))], BASE)
    theirs = spark.createDataFrame([(3, "c", 120, "c", ts(120))], BASE)
    decoded: Any = None  # the sink reads only the rows, the stats and the commit metadata
    assert base.write_changes(theirs, ("id",), None, meta, "app", 1)  # the other run's write 1
    with pytest.raises(RetryableError, match="another writer committed its write 1"):
        Base(base, "app").write(AppliedBatch(decoded, BatchStats(), meta, 1, ours))
    stored = spark.read.format("delta").load(base.path)
    assert sorted(r["id"] for r in stored.collect()) == [1, 3]
