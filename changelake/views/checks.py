"""verify of the views (views.json), each against the table `verify` has just proved equal to
the source, and the enrichment's lookup recomputed from the stored changes another way.

- A history's current versions must be its table's rows, row for row (each with the LSN of the
  change that made it). What it promises for past versions the unit tests' replays prove.
- An enrichment's newest change per key (deletes aside) must be its table's rows, and each
  change's lookup columns must be those of the lookup row's newest stored change at or before
  the change's LSN (NULL when that is a delete or a truncate came after it): a max-by over the
  stored changes instead of the view's intervals of validity.
- An aggregate, once `run` has maintained it through what its tables cover, must be the whole
  view computed again from the tables' rows (which equal the source), group for group.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from changelake.changelog.decode import LSN, OFFSET, OP, PARTITION, SOURCE_TS
from changelake.exceptions import first_line
from changelake.lake.layout import DELETED, DELETED_AT, delta_exists
from changelake.lake.table import covered, read_table
from changelake.verify.diff import SAMPLE, Differences
from changelake.views.aggregate import aggregated
from changelake.views.aggregate_config import Aggregate
from changelake.views.config import Lookup, load_views
from changelake.views.derived import DerivedView, build_view, recorded
from changelake.views.enrichment import LOOKUP_LSN
from changelake.views.history import CURRENT, VALID_FROM_LSN, new_versions
from changelake.views.interval_config import IntervalJoin
from changelake.views.stored_history import stored_history, versions_of
from changelake.views.window_config import EventTime
from changelake.views.windows import END, START
from changelake.waiting import wait_until

_NOT_DATA = (LSN, OP, SOURCE_TS, DELETED, DELETED_AT)
_POSITION = (LSN, PARTITION, OFFSET)


def check_view(
    spark: SparkSession,
    view: DerivedView,
    timeout_s: float = 120.0,
    running: Mapping[str, Any] | None = None,
) -> Differences:
    """`running`: the running pipeline's state (pipeline_file.pipeline_state), to say why an
    aggregate lags."""
    if view.spec.aggregate is not None:
        return check_aggregate(spark, view, view.spec.aggregate, timeout_s, running or {})
    if view.spec.event_time is not None:
        return check_event_time(spark, view, view.spec.event_time)
    if view.spec.interval is not None:
        return check_interval(spark, view, view.spec.interval)
    found = Differences("delta")
    ref, path = view.refs[0], view.paths[0]
    built = build_view(spark, view) if delta_exists(spark, path) else None
    if built is None:
        found.samples.append("not started (it starts when `run` prepares its tables)")
        return found
    read = read_table(spark, path, ref.soft_delete)
    key = read.meta.key if read.meta else ()
    data = [c for c in read.rows.columns if c not in _NOT_DATA]
    live = read.live()
    if view.spec.kind == "history":
        # A re-read equal to the version before it (a re-send, a re-sync) is no new version,
        # while the table takes its LSN: a current version began at or before the table's row.
        versions = built.where(F.col(CURRENT))
        _compare(found, live.select(*data), versions.select(*data), key, "current version")
        later = versions.join(live.select(*key, LSN), list(key))
        later = later.where(F.col(VALID_FROM_LSN) > F.col(LSN)).select(*key, LSN)
        _add(found, "differing", later, key, "current version, newer than the table's row,")
    else:
        current = _newest(built, key).select(*data, LSN)
        _compare(found, live.select(*data, LSN), current, key, "current version")
    if view.spec.lookup is not None:
        _check_lookups(spark, view, view.spec.lookup, built, key, found)
    return found


def _check_lookups(
    spark: SparkSession,
    view: DerivedView,
    lookup: Lookup,
    built: DataFrame,
    key: Sequence[str],
    found: Differences,
) -> None:
    stream, other = stored_history(spark, view.paths[0]), stored_history(spark, view.paths[1])
    assert stream is not None and other is not None  # the view was built from them
    # The lookup's versions as the view takes them: re-reads that change nothing are none.
    theirs = other[0]
    cuts = theirs.where(F.col(OP) == "t")
    truncates = [(int(t[0]), t[1]) for t in cuts.select(LSN, SOURCE_TS).distinct().collect()]
    theirs = new_versions(theirs, other[1], truncates).unionByName(cuts)
    expected = recomputed(stream[0], key, theirs, lookup)
    ours = built.select(*key, LSN, OP, *[n for n, _ in lookup.columns], LOOKUP_LSN)
    _add(found, "differing", ours.exceptAll(expected), key, "enriched change")
    _add(found, "missing", expected.join(ours, [*key, LSN, OP], "left_anti"), key, "change")


def _newest(changes: DataFrame, key: Sequence[str]) -> DataFrame:
    """Each key's newest change, unless it is a delete."""
    newest = F.row_number().over(Window.partitionBy(*key).orderBy(F.col(LSN).desc()))
    return changes.select("*", newest.alias("_n")).where((F.col("_n") == 1) & (F.col(OP) != "d"))


def recomputed(
    stream: DataFrame, key: Sequence[str], theirs: DataFrame, lookup: Lookup
) -> DataFrame:
    """The enrichment of the stored changes `stream` (key `key`) by the lookup table's stored
    changes `theirs`: per change, its key, LSN, op, lookup columns and `_lookup_lsn`."""
    truncates = [int(r[0]) for r in theirs.where(F.col(OP) == "t").select(LSN).collect()]
    ours = _on_values(stream, key, [o for o, _ in lookup.on])
    rows = theirs.where(F.col(OP) != "t").select(
        *[F.col(c).alias(f"_k{i}") for i, (_, c) in enumerate(lookup.on)],
        F.struct(*_POSITION).alias("_at"),
        F.struct(F.col(OP).alias("op"), *[F.col(c).alias(n) for n, c in lookup.columns]).alias(
            "_row"
        ),
    )
    condition = F.col(f"_at.{LSN}") <= F.col(LSN)
    for i, (o, _) in enumerate(lookup.on):
        condition &= F.col(o) == F.col(f"_k{i}")
    joined = ours.join(rows, condition, "left")
    newest = joined.groupBy(*key, LSN, OP).agg(
        F.max_by("_row", "_at").alias("_row"), F.max("_at").alias("_at")
    )
    gone = F.col("_row").isNull() | (F.col("_row.op") == "d")
    for t in truncates:  # a truncate between the lookup row's change and ours emptied it
        gone |= (F.col(f"_at.{LSN}") < F.lit(t)) & (F.lit(t) <= F.col(LSN))
    return newest.select(
        *key,
        LSN,
        OP,
        *[F.when(~gone, F.col(f"_row.{n}")).alias(n) for n, _ in lookup.columns],
        F.when(~gone, F.col(f"_at.{LSN}")).alias(LOOKUP_LSN),
    )


def _on_values(stored: DataFrame, key: Sequence[str], on: Sequence[str]) -> DataFrame:
    """Each stored change of the view's table (once) with its `on` columns: a delete's are its
    key's newest earlier change's (its event may hold the key alone)."""
    rows = stored.where(F.col(OP) != "t").dropDuplicates([*key, LSN, OP])
    earlier = rows.where(F.col(OP) != "d").select(
        *[F.col(k).alias(f"_e_{k}") for k in key],
        F.struct(*_POSITION).alias("_e_at"),
        F.struct(*on).alias("_e_on"),
    )
    deletes = rows.where(F.col(OP) == "d")
    condition = F.col("_e_at") < F.struct(*_POSITION)
    for k in key:
        condition &= F.col(k) == F.col(f"_e_{k}")
    values = [o for o in on if o not in key]
    prior = F.col("_on")
    filled = (
        deletes.join(earlier, condition, "left")
        .groupBy(*key, LSN, OP)
        .agg(F.max_by("_e_on", "_e_at").alias("_on"), *[F.first(o).alias(o) for o in values])
        .select(  # without an earlier change, the delete's own values
            *key,
            LSN,
            OP,
            *[F.when(prior.isNull(), F.col(o)).otherwise(prior[o]).alias(o) for o in values],
        )
    )
    return rows.where(F.col(OP) != "d").select(*key, LSN, OP, *values).unionByName(filled)


def _compare(
    found: Differences, expected: DataFrame, shown: DataFrame, key: Sequence[str], what: str
) -> None:
    """Rows `expected` has that `shown` lacks are missing, the other way round extra."""
    expected = expected.persist()
    try:
        found.rows = expected.count()
        _add(found, "missing", expected.exceptAll(shown), key, what)
        _add(found, "extra", shown.exceptAll(expected), key, what)
    finally:
        expected.unpersist()


def _add(found: Differences, kind: str, rows: DataFrame, key: Sequence[str], what: str) -> None:
    rows = rows.persist()
    try:
        count = rows.count()
        setattr(found, kind, getattr(found, kind) + count)
        at = [LSN] if LSN in rows.columns else []
        for row in rows.select(*key, *at).limit(SAMPLE).collect():
            values = tuple(row)
            where = f" at LSN {values[-1]}" if at else ""
            found.samples.append(f"{kind} {what} {values[: len(key)]}{where}")
    finally:
        rows.unpersist()


def check_aggregate(
    spark: SparkSession,
    view: DerivedView,
    agg: Aggregate,
    timeout_s: float,
    running: Mapping[str, Any],
) -> Differences:
    """An aggregate view, once it covers what its tables cover now (the run maintains it every
    few seconds), against the whole view computed again from the tables' rows."""
    found = Differences("delta")
    behind = _wait_covered(spark, view, timeout_s)
    if behind:
        found.samples.append(
            f"not maintained through {', '.join(behind)}'s newest changes: "
            + why_not_maintained(view.name, running)
        )
        return found
    reads = [
        read_table(spark, p, r.soft_delete) for p, r in zip(view.paths, view.refs, strict=True)
    ]
    key = reads[0].meta.key if reads[0].meta else ()
    current = {t: r.live() for t, r in zip(view.spec.tables, reads, strict=True)}
    stored = spark.read.format("delta").load(view.stored_at)
    expected = aggregated(agg, view.spec.table, key, current).select(*stored.columns)
    _compare(found, expected, stored, key, "group")
    return found


def why_not_maintained(name: str, running: Mapping[str, Any]) -> str:
    """Why the view `name` lags its tables, from the running pipeline's state: no pipeline, one
    whose views file does not declare it (a run started with another), or one still at it."""
    if not running.get("running"):
        return "no `changelake run` is running to maintain it"
    pid, file = running.get("pid"), running.get("views_file")
    try:
        declared = {spec.name for spec in load_views(Path(file), required=True)} if file else None
    except Exception as exc:  # gone or unreadable now: say so
        return f"the running pipeline (pid {pid}) reads its views from {file}: {first_line(exc)}"
    if declared is not None and name not in declared:
        return (
            f"the running pipeline (pid {pid}) reads its views from {file}, which does not "
            f"declare {name}: restart `changelake run` with the views file that does"
        )
    return f"the running pipeline (pid {pid}) maintains it and has not caught up yet"


def _wait_covered(spark: SparkSession, view: DerivedView, timeout_s: float) -> list[str]:
    """Nothing once the view's newest commit covers each table's offsets as they are now;
    else, past `timeout_s`, the tables whose newest changes it lacks."""
    wanted = {t: covered(spark, p) for t, p in zip(view.spec.tables, view.paths, strict=True)}
    behind: list[str] = []

    def caught_up() -> bool:
        doc = recorded(spark, view.stored_at)
        behind[:] = [
            t
            for t, meta in wanted.items()
            if meta is not None
            and not _reaches(
                ((doc or {}).get("tables") or {}).get(t, {}).get("offsets"), meta.offsets
            )
        ]
        return not behind

    wait_until(caught_up, timeout_s)
    return behind


def _reaches(have: dict[str, int] | None, want: dict[str, int]) -> bool:
    return have is not None and all(have.get(p, 0) >= o for p, o in want.items())


def check_event_time(spark: SparkSession, view: DerivedView, spec: EventTime) -> Differences:
    """Windows: per window, its figures plus its late ones are what the table holds in it now,
    computed again from the table's rows (which equal the source). Sessions: every row of the
    table is in one session of its key, and a key's sessions are more than the gap apart."""
    found = Differences("delta")
    built = build_view(spark, view)
    if built is None:
        found.samples.append("not started (it starts when `run` prepares its table)")
        return found
    ref = view.refs[0]
    rows = read_table(spark, view.paths[0], ref.soft_delete).live()
    rows = rows.where(F.col(spec.time).isNotNull())
    names = [n for n, _ in spec.sums]
    if view.spec.kind == "window":
        window = F.window(spec.time, f"{spec.size_s} seconds", f"{spec.slide_s} seconds")
        held = rows.select(window.alias("_w"), *[F.col(c).alias(n) for n, c in spec.sums])
        expected = held.groupBy(F.col("_w.start").alias(START), F.col("_w.end").alias(END)).agg(
            F.count("*").alias("events"), *[F.sum(n).alias(n) for n in names]
        )
        shown = built.select(
            START,
            END,
            (F.col("events") + F.col("late_events")).alias("events"),
            *[(F.col(n) + F.col(f"late_{n}")).alias(n) for n in names],
        ).where(F.col("events") != 0)
        key: Sequence[str] = (START, END)
    else:
        per_key = rows.groupBy(*spec.by).agg(
            F.count("*").alias("events"), *[F.sum(c).alias(n) for n, c in spec.sums]
        )
        expected = per_key
        shown = built.groupBy(*spec.by).agg(
            F.sum("events").alias("events"), *[F.sum(n).alias(n) for n in names]
        )
        following = Window.partitionBy(*spec.by).orderBy("session_start")
        apart = built.select(
            *spec.by, "session_end", F.lead("session_start").over(following).alias("_next")
        )
        _add(
            found,
            "differing",
            apart.where(F.col("_next") <= F.col("session_end")),
            spec.by,
            "session",
        )
        key = spec.by
    _compare(found, expected, shown, key, "window")
    return found


def check_interval(spark: SparkSession, view: DerivedView, spec: IntervalJoin) -> Differences:
    """Each key's pair found again by ranking instead of min-by: its first change making the
    first condition true, and the earliest later change making the second true within the bound
    (the view's state and lateness figures aside)."""
    found = Differences("delta")
    built = build_view(spark, view)
    stored = stored_history(spark, view.paths[0])
    if built is None or stored is None:
        found.samples.append("not started (it starts when `run` prepares its table)")
        return found
    versions, key = versions_of(*stored), stored[1]
    by_lsn = Window.partitionBy(*key).orderBy(VALID_FROM_LSN)
    first = versions.where(F.expr(spec.first.when) & F.col(spec.first.time).isNotNull())
    first = first.select(*key, VALID_FROM_LSN, F.col(spec.first.time).alias("first_at"))
    first = first.select("*", F.row_number().over(by_lsn).alias("_n")).where("_n = 1")
    second = versions.where(F.expr(spec.second.when) & F.col(spec.second.time).isNotNull())
    second = second.select(
        *[F.col(k).alias(f"_{k}") for k in key],
        F.col(VALID_FROM_LSN).alias("_lsn"),
        F.col(spec.second.time).alias("second_at"),
    )
    bound = F.col("first_at") + F.expr(f"INTERVAL {spec.within_s} SECONDS")
    condition = (F.col("_lsn") > F.col(VALID_FROM_LSN)) & F.col("second_at").between(
        F.col("first_at"), bound
    )
    for k in key:
        condition &= F.col(k) == F.col(f"_{k}")
    pairs = first.join(second, condition, "left")
    earliest = Window.partitionBy(*key).orderBy(F.col("_lsn").asc_nulls_last())
    expected = (
        pairs.select(*key, "first_at", "second_at", F.row_number().over(earliest).alias("_m"))
        .where("_m = 1")
        .drop("_m")
    )
    _compare(found, expected, built.select(*key, "first_at", "second_at"), key, "pair")
    return found
