"""An aggregate view over a tree of joins (views/aggregate_config.py), maintained incrementally:
each round recomputes only the groups (rows of the root table) that a change since the last
round can have touched, never the whole view. Pure DataFrame-in, DataFrame-out.

Which groups a change touches is found from the stored histories, bottom up through the tree.
A changed row of a table touches the parent rows its foreign key named in ANY of its stored
versions (so an order moved from customer a to b touches both, and a deleted order whose event
holds its key alone touches the customer it had), and the parent rows its children's changes
touched are followed up through the parent's current rows. That is a superset of the groups
whose result changed: recomputing a group that did not change is harmless, missing one is not.
A truncate touches everything: the caller recomputes the whole view.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from changelake.changelog.decode import OP
from changelake.views.aggregate_config import Aggregate

Keys = Mapping[str, Sequence[str]]  # each table's key columns


def touched_groups(
    agg: Aggregate,
    root: str,
    keys: Keys,
    new: Mapping[str, DataFrame],
    stored: Mapping[str, DataFrame],
    current: Mapping[str, DataFrame],
) -> DataFrame:
    """The root keys (in the root's key column names) whose group a change in `new` (each
    table's stored changes since the last round, truncates excluded) can have touched.
    `stored`: each table's whole stored history; `current`: each table's rows now."""
    up: dict[str, list[DataFrame]] = {}  # per table: its keys its children's changes touched
    for join in reversed(agg.joins):  # children before their parents
        table, parent = join.table, join.parent
        changed = new[table].select(*keys[table]).distinct()
        versions = stored[table].where(F.col(OP) != "t").join(changed, list(keys[table]))
        named = [_parent_keys(versions, join.on)]
        if table in up:  # rows its own children touched: their parents, as the rows are now
            rows = current[table].join(_union(up[table]).distinct(), list(keys[table]))
            named.append(_parent_keys(rows, join.on))
        up.setdefault(parent, []).extend(named)
    own = new[root].select(*keys[root])
    return _union([own, *up.get(root, [])]).distinct()


def _parent_keys(rows: DataFrame, on: Sequence[tuple[str, str]]) -> DataFrame:
    """The parent keys `rows` name by their foreign key (`on`: (column, parent key column))."""
    named = rows.select(*[F.col(ours).alias(theirs) for ours, theirs in on])
    return named.dropna()


def _union(frames: Sequence[DataFrame]) -> DataFrame:
    first, *rest = frames
    for frame in rest:
        first = first.unionByName(frame)
    return first


def aggregated(
    agg: Aggregate,
    root: str,
    root_key: Sequence[str],
    current: Mapping[str, DataFrame],
    groups: DataFrame | None = None,
) -> DataFrame:
    """The view's rows from the tables' current rows: every group, or those in `groups` (root
    keys). Measures name columns as `<table>.<column>`."""
    rows = current[root]
    if groups is not None:
        rows = rows.join(F.broadcast(groups), list(root_key), "left_semi")
    joined = rows.alias(root)
    for join in agg.joins:
        condition = [
            F.col(f"{join.table}.{ours}") == F.col(f"{join.parent}.{theirs}")
            for ours, theirs in join.on
        ]
        how = "left" if join.optional else "inner"
        joined = joined.join(current[join.table].alias(join.table), condition, how)
    by = [F.col(f"{root}.{k}").alias(k) for k in root_key]
    by += [F.col(f"{root}.{theirs}").alias(name) for name, theirs in agg.columns]
    return joined.groupBy(*by).agg(*[F.expr(sql).alias(name) for name, sql in agg.measures])
