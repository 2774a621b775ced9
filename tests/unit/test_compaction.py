"""Compaction changes nothing a reader sees: after every append and every compaction (repeated, as
after a crash), base ⊕ changelog equals the changes applied one by one, and after a compaction
the base table alone does too. Deletes, truncates, soft deletes. A local Spark session and Delta
tables under tmp_path; no services."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from changelake.apply.compaction import Sealed, compact
from changelake.apply.compactor import FIRST_GUESS_S, MARGIN_S, Compactor, round_start
from changelake.lake.commits import CommitMeta
from changelake.lake.layout import changelog_of
from changelake.lake.table import read_table
from changelake.sinks.changelog import ChangelogSink
from changelake.sinks.delta import DeltaSink
from changelake.sinks.delta_jvm import DeltaJvm
from changelake.sinks.merge_on_write import BASE_PROPERTIES
from changelake.tables import TableRef
from tests.support import wait_for
from tests.unit.test_read_view import BASE, CHANGELOG, SOFT, Event, apply, events, rows, ts

# Delta keeps a version's checksum in memory after its own commit (incremental commit) as well as
# writing it beside the version: both off, the table's state is rebuilt to read its files.
CHECKSUM_SETTINGS = (
    "spark.databricks.delta.writeChecksumFile.enabled",
    "spark.databricks.delta.incremental.commit.enabled",
)
BATCH = 5  # changes per append
COMPACT_EVERY = 2  # appends per compaction


def batch_rows(batch: list[Event], state: dict[int, Any], offset: int, soft: bool) -> list[Any]:
    """What the append writes for one batch: changes after the batch's truncate, a soft delete
    carrying the row it deletes (a delete of a key the table lacks: not written)."""
    last = max((lsn for op, _, _, lsn in batch if op == "t"), default=None)
    if last is not None and not soft:  # a soft-deleting table keeps the wiped rows, marked
        state.clear()
    out = []
    for i, (op, key, value, lsn) in enumerate(batch):
        if op == "t" or (last is not None and lsn < last):
            continue
        if op == "d" and soft:
            if key not in state:
                continue
            value = state[key]
        if op == "d" and not soft:
            state.pop(key, None)
        else:
            state[key] = value
        out.append((key, value, lsn, op, ts(lsn), 0, offset + i))
    return out


@pytest.mark.parametrize(("soft", "checksums"), [(False, True), (True, True), (False, False)])
def test_reads_equal_the_changes_through_appends_and_compactions(
    spark: SparkSession, tmp_path: Path, soft: bool, checksums: bool, request: Any
) -> None:
    """`checksums`: whether Delta writes a checksum file beside each version, from which
    merge-on-write reads the table's files and transaction ids; without one (another writer's
    table, a crash between commit and checksum, too many files to list) it reads them from
    Delta's rebuilt state."""
    for name in () if checksums else CHECKSUM_SETTINGS:
        spark.conf.set(name, "false")
        request.addfinalizer(lambda name=name: spark.conf.unset(name))
    ref = TableRef("public", "t", "p.public.t", "c", "s", soft_delete=soft)
    lake = str(tmp_path / "lake")
    base = DeltaSink(spark, ref.path(lake), ref.name, soft)
    log = ChangelogSink(spark, changelog_of(base.path))
    changes = events(7, count=30)
    seed = changes[:5]
    snapshot = spark.createDataFrame(rows(apply(seed, soft), soft), SOFT if soft else BASE)
    snapshot.write.format("delta").option(
        "userMetadata", CommitMeta("snapshot", ref.topic, {"0": 5}, 140, None, ("id",)).to_json()
    ).save(base.path)

    state: dict[int, Any] = {k: r[0] for k, r in apply(seed, soft).items()}
    truncate: dict[str, Any] | None = None
    epoch, done = 1, 5
    for n, start in enumerate(range(5, len(changes), BATCH)):
        batch = changes[start : start + BATCH]
        done = start + len(batch)
        for op, _, _, lsn in batch:
            if op == "t":
                truncate = {"lsn": lsn, "source_ts": ts(lsn).isoformat() + "+00:00"}
        extra = {"epoch": epoch, **({"truncate": truncate} if truncate else {})}
        meta = CommitMeta("apply", ref.topic, {"0": done}, batch[-1][3], None, ("id",), 0, extra)
        appended = batch_rows(batch, state, start, soft)
        log.append(spark.createDataFrame(appended, CHANGELOG), epoch, meta)
        want = rows(apply(changes[:done], soft), soft)
        assert sorted(tuple(r) for r in read_table(spark, base.path, soft).rows.collect()) == want

        if n % COMPACT_EVERY == COMPACT_EVERY - 1:
            sealed = Sealed(ref, "app", epoch, meta)
            said: list[str] = []
            Compactor(spark, lake, tmp_path / "run", 30, said.append).run(sealed)  # and VACUUM
            assert len(said) == 1, said
            assert said[0].startswith(f"t: compacted changelog epochs through {epoch} into the ")
            assert not compact(spark, lake, tmp_path / "run", sealed)  # repeated: a no-op
            read = read_table(spark, base.path, soft)
            assert read.pending is None
            assert sorted(tuple(r) for r in read.rows.collect()) == want
            stored = spark.read.format("delta").load(base.path)
            assert sorted(tuple(r) for r in stored.collect()) == want
            assert log.rows(0).count() == 0
            epoch += 1
    jvm = DeltaJvm(spark)
    assert jvm.transaction(base.path).snapshot().checksumOpt().isDefined() == checksums
    # Made by a plain write, as before deletion vectors and seldom checkpoints were the rule for
    # base tables: the first compaction gave it both.
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{base.path}`").first()
    assert detail is not None
    assert {k: detail["properties"].get(k) for k in BASE_PROPERTIES} == BASE_PROPERTIES


def test_a_round_starts_in_time_for_the_oldest_change() -> None:
    # committed at 100, target 15, a round takes 4: start by 100 + 15 - margin - 4
    assert round_start(100.0, 15.0, 4.0) == 100.0 + 15.0 - MARGIN_S - 4.0
    # rounds slower than the target: a start time already past, so at once
    assert round_start(100.0, 15.0, 30.0) == 100.0 + 15.0 - MARGIN_S - 30.0
    assert round_start(None, 15.0, 4.0) is None


class Quiet:
    """A table that appended changes at `since` and then nothing: what the compactor sees of a
    TableApplier whose source went quiet."""

    def __init__(self, table: TableRef, since: float | None, sealed: Sealed | None):
        self.table, self.since, self.sealed, self.seals = table, since, sealed, 0

    def pending_since(self) -> float | None:
        return self.since

    def seal_between_batches(self, wait_s: float) -> Sealed | None:
        self.seals += 1
        self.since, sealed, self.sealed = None, self.sealed, None
        return sealed


def test_a_quiet_table_is_sealed_by_the_compactor_once_its_target_is_near(
    spark: SparkSession, tmp_path: Path
) -> None:
    """No batch follows the last one: a round seals the epoch itself, and only when due (a
    table with nothing pending is left alone; a failed compaction is retried later)."""
    ref = TableRef("public", "q", "p.public.q", "c", "s")
    compactor = Compactor(spark, str(tmp_path / "lake"), tmp_path / "run", 15.0, print)
    assert compactor.due() is None
    sealed = Sealed(ref, "app", 1, CommitMeta("apply", ref.topic, {"0": 1}, 1, None, ("id",)))
    now = time.monotonic()
    table = Quiet(ref, now, sealed)
    compactor.register(table)
    assert compactor.due() == pytest.approx(now + 15.0 - MARGIN_S - FIRST_GUESS_S)
    # due in 11 s: room for verification's 5-s step, not for 15 s; none while a round runs
    assert compactor.leaves_room(5.0) and not compactor.leaves_room(15.0)
    compactor.running = True
    assert not compactor.leaves_room(0.0)
    compactor.running = False
    compactor.start()
    try:
        table.since = now - 20.0  # overdue: a round seals and compacts (no base table: fails)
        wait_for(lambda: "q" in compactor.failed, 30, "the round")
        assert table.seals == 1
        failed = compactor.failed["q"]
        assert failed.sealed == sealed and failed.retry_at > time.monotonic()  # kept, for later
        assert compactor.due() is None  # nothing else pending, and not before its retry
        failed.retry_at = time.monotonic() - 0.1
        assert compactor.due() == pytest.approx(time.monotonic(), abs=1.0)
    finally:
        compactor.stop(wait_s=30)


def test_a_seal_covers_the_epochs_appended_to_never_a_fresh_one() -> None:
    """Resumed with a crashed run's epochs (the newest appended: 3), the applier appends next to
    epoch 4; sealing then must cover 3, not 4: a restarted stream's new applier would append to
    4 again while this seal's MERGE told readers the base table held it."""
    from changelake.apply.batch import TableApplier

    ref = TableRef("public", "t", "p.public.t", "c", "s")
    meta = CommitMeta("apply", ref.topic, {"0": 9}, 9, None, ("id",))
    applier = object.__new__(TableApplier)  # no Spark: seal() reads only what resume() set
    applier.table, applier.app_id, applier.previous = ref, "app", meta
    applier.resumed, applier.dirty_since = True, 0.0
    applier.appended, applier.epoch = 3, 4
    sealed = applier.seal()
    assert sealed is not None and sealed.epoch == 3
    assert (applier.epoch, applier.pending_since()) == (4, None)
    assert applier.seal() is None  # nothing new
    applier.appended, applier.dirty_since = 4, 0.0  # a batch appended to epoch 4
    sealed = applier.seal()
    assert sealed is not None and sealed.epoch == 4 and applier.epoch == 5
