"""Aggregate views (views.json, `kind: aggregate`) kept current by `run`, each a Delta table of
its own at `<lake>/_views/<name>`.

A round reads, per table the view joins, what its commits cover (Kafka offsets) before reading
its rows, and takes from its stored history the changes between the offsets the view's last
commit recorded and those: every such change is in the rows read. It recomputes the groups those
changes can have touched (views/aggregate.py) and MERGEs them in (a group with no rows left is
deleted), in one commit that records the new offsets. A crash before the commit repeats the
round; one after it finds nothing new. The whole view is computed again instead when it has no
commit yet, its declaration changed, a table it joins was truncated or snapshotted again (the
history restarts then), or an incremental round fails (a column widened under a measure).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import reduce
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from changelake import lakefs, run_log
from changelake.changelog.decode import OFFSET, OP, PARTITION
from changelake.exceptions import ConfigError
from changelake.lake.commits import CommitMeta
from changelake.lake.table import covered, read_table, truncate_of
from changelake.spark import kept, release
from changelake.views.aggregate import aggregated, touched_groups
from changelake.views.derived import VIEWS, DerivedView, recorded
from changelake.views.stored_history import stored_history

Out = Callable[[str], None]
_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
POOL = "views"  # its Spark scheduler pool, see fairscheduler.xml
_PRESENT = "_present"


@dataclass(frozen=True)
class Round:
    groups: int | None  # recomputed groups; None: the whole view was computed
    rows: int | None = None  # the view's rows after a whole computation
    why: str = ""  # why it was computed whole


def fingerprint(view: DerivedView) -> str:
    """What the view's rows depend on besides the data: its declaration and its tables' paths."""
    text = repr((view.spec.aggregate, view.spec.table, view.paths))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def maintain(spark: SparkSession, view: DerivedView) -> Round | None:
    """One round (see the module's doc); None when a table it joins has no history yet or
    nothing changed since the last round."""
    agg = view.spec.aggregate
    assert agg is not None
    names = view.spec.tables
    metas = {t: covered(spark, p) for t, p in zip(names, view.paths, strict=True)}
    stored = {t: stored_history(spark, p) for t, p in zip(names, view.paths, strict=True)}
    found = {t: (m, s) for t, m in metas.items() if m and m.key and (s := stored[t]) is not None}
    if len(found) < len(names):
        return None
    keys = {t: m.key for t, (m, _) in found.items()}
    offsets = {t: m.offsets for t, (m, _) in found.items()}
    histories = {t: s[0] for t, (_, s) in found.items()}
    _check_keys(view, keys)
    now = {
        "changelake_view": 1,
        "fingerprint": fingerprint(view),
        "paths": list(view.paths),
        "tables": {
            t: {"offsets": offsets[t], "truncate": _truncate_lsn(m)} for t, (m, _) in found.items()
        },
    }
    current = {
        t: read_table(spark, p, r.soft_delete).live()
        for t, p, r in zip(names, view.paths, view.refs, strict=True)
    }
    path = view.stored_at
    before = recorded(spark, path)
    if before == now:
        return None
    whole = _planned(view, keys, current)
    why = _why_whole(before, now)
    if not why:
        assert before is not None
        new = {
            t: s.where(_between(before["tables"][t]["offsets"], offsets[t]))
            for t, s in histories.items()
        }
        try:
            groups = touched_groups(agg, view.spec.table, keys, new, histories, current)
            return _merge(spark, path, kept(groups), view, keys, current, now)
        except Exception as exc:  # e.g. a widened column under a measure: the whole view
            why = f"the incremental round failed ({str(exc).splitlines()[0][:200]})"
    with _committing(spark, now):
        whole.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)
    return Round(None, spark.read.format("delta").load(path).count(), why)


def _planned(
    view: DerivedView, keys: dict[str, tuple[str, ...]], current: dict[str, DataFrame]
) -> DataFrame:
    """The whole view, planned: a measure or column that does not read is the file's mistake."""
    from pyspark.errors import AnalysisException

    agg = view.spec.aggregate
    assert agg is not None
    try:
        return aggregated(agg, view.spec.table, keys[view.spec.table], current)
    except AnalysisException as exc:
        message = str(exc).splitlines()[0]
        where = view.spec.where
        raise ConfigError(f"{where}: its columns or measures do not read: {message}") from None


def _why_whole(before: dict[str, Any] | None, now: dict[str, Any]) -> str:
    """Why the view must be computed whole ("": a round of changes will do)."""
    if before is None:
        return "it had no rows yet"
    if before.get("fingerprint") != now["fingerprint"]:
        return "its declaration changed"
    for table, v in now["tables"].items():
        if table not in before["tables"]:
            return f"it joins {table} now"
        if before["tables"][table].get("truncate") != v["truncate"]:
            return f"{table} was truncated"
    return ""


def _merge(
    spark: SparkSession,
    path: str,
    groups: DataFrame,
    view: DerivedView,
    keys: dict[str, tuple[str, ...]],
    current: dict[str, DataFrame],
    now: dict[str, Any],
) -> Round:
    agg, key = view.spec.aggregate, keys[view.spec.table]
    assert agg is not None
    rows = aggregated(agg, view.spec.table, key, current, groups)
    # Computed once: the MERGE reads its source twice (to find the files it rewrites, then to
    # write them), which would run the joins twice.
    source = kept(groups.join(rows.withColumn(_PRESENT, F.lit(True)), list(key), "left"))
    try:
        count = groups.count()
        columns = list(rows.columns)
        on = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in key)
        values: dict[str, str | Column] = {f"`{c}`": f"s.`{c}`" for c in columns}
        with _committing(spark, now):
            (
                DeltaTable.forPath(spark, path)
                .alias("t")
                .merge(source.alias("s"), on)
                .whenMatchedDelete(f"s.{_PRESENT} IS NULL")
                .whenMatchedUpdate(f"s.{_PRESENT} IS NOT NULL", values)
                .whenNotMatchedInsert(f"s.{_PRESENT} IS NOT NULL", values)
                .execute()
            )
        return Round(count, None)
    finally:
        release(source)
        release(groups)


def _between(since: dict[str, int] | None, until: dict[str, int]) -> Column:
    """Stored changes at offsets from `since` (the last round's) up to `until` (not included);
    none of a truncate (the whole view is computed again for one)."""
    since = since or {}
    parts = [
        (F.col(PARTITION) == int(p)) & (F.col(OFFSET) >= since.get(p, 0)) & (F.col(OFFSET) < end)
        for p, end in until.items()
    ]
    return reduce(lambda a, b: a | b, parts, F.lit(False)) & (F.col(OP) != "t")


def _truncate_lsn(meta: CommitMeta) -> int | None:
    truncate = truncate_of(meta)
    return truncate.lsn if truncate is not None else None


def _check_keys(view: DerivedView, keys: dict[str, tuple[str, ...]]) -> None:
    agg = view.spec.aggregate
    assert agg is not None
    for name, theirs in agg.columns:
        if theirs in keys[view.spec.table]:
            raise ConfigError(
                f"{view.spec.where}.columns.{name}: {theirs} is {view.spec.table}'s key, which "
                "the view has already, under its own name"
            )
    for i, join in enumerate(agg.joins):
        if sorted(theirs for _, theirs in join.on) != sorted(keys[join.parent]):
            raise ConfigError(
                f"{view.spec.where}.joins[{i}].on: must name each of {join.parent}'s key "
                f"columns ({', '.join(keys[join.parent])}), so a row hangs from one parent row"
            )


@contextmanager
def _committing(spark: SparkSession, doc: dict[str, Any]) -> Iterator[None]:
    spark.conf.set(_USER_METADATA, json.dumps(doc, sort_keys=True))
    try:
        yield
    finally:
        spark.conf.unset(_USER_METADATA)


def drop_views_reading(spark: SparkSession, lake: str, base_path: str) -> None:
    """Before a table is snapshotted again: the views that join it are deleted, to be computed
    whole by their next round."""
    root = f"{lake.rstrip('/')}/{VIEWS}"
    for name in lakefs.names(spark, root) if lakefs.exists(spark, root) else []:
        doc = recorded(spark, f"{root}/{name}")
        if doc is None or base_path in doc.get("paths", []):
            lakefs.delete(spark, f"{root}/{name}")


class ViewMaintainer:
    """One background thread that runs a round of each aggregate view (`views`) every
    `every_s`."""

    def __init__(
        self,
        spark: SparkSession,
        views: Callable[[], list[DerivedView]],
        every_s: float,
        out: Out,
    ):
        self.spark = spark.newSession()  # its commit metadata must not reach the stream's
        self.views, self.every_s, self.out = views, every_s, out
        self.stopping = threading.Event()
        self.failing: set[str] = set()
        self.thread = threading.Thread(target=self._loop, name="changelake-views", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self, wait_s: float) -> None:
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(wait_s)

    def run_all(self) -> None:
        """A round of each view now, on the caller's thread (a `--once` run ends with these)."""
        for view in self.views():
            if not self.stopping.is_set():
                self._round(view)

    def _round(self, view: DerivedView) -> None:
        started = time.monotonic()
        try:
            done = maintain(self.spark, view)
        except Exception as exc:
            if view.name not in self.failing:
                self.out(run_log.warning(f"view {view.name}: not maintained: {exc}"))
            self.failing.add(view.name)
            return
        self.failing.discard(view.name)
        if done is not None:
            took = time.monotonic() - started
            what = (
                f"computed whole ({done.why}), {done.rows or 0:,} rows"
                if done.groups is None
                else f"{done.groups:,} groups recomputed"
            )
            self.out(f"view {view.name}: {what} in {took:.1f}s")

    def _loop(self) -> None:
        # Its jobs yield to the stream's batches (fairscheduler.xml).
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", POOL)
        while not self.stopping.wait(self.every_s):
            self.run_all()
