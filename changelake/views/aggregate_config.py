"""An aggregate view's declaration (views.json, `kind: aggregate`): one row per row of `table`
that has a match in its first join, with `table`'s `columns` and `measures` (Spark SQL
aggregate expressions) over the joined rows. Joins form a tree: each names the tables already
joined it hangs from, by a foreign key onto that table's key.

    "customer_revenue": {"kind": "aggregate", "table": "customers", "columns": ["country"],
      "joins": [{"table": "orders", "on": {"customer_id": "customers.id"}},
                {"table": "order_lines", "on": {"order_id": "orders.id"}, "optional": true}],
      "measures": {"orders": "count(DISTINCT orders.id)",
                   "revenue": "coalesce(sum(order_lines.qty * order_lines.unit_price), 0)"}}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from changelake.exceptions import ConfigError

FIELDS = {"kind", "table", "columns", "joins", "measures"}


@dataclass(frozen=True)
class Join:
    table: str
    parent: str  # the joined table it hangs from
    on: tuple[tuple[str, str], ...]  # (its column, the parent's key column)
    optional: bool  # a left join: parent rows without a match still count


@dataclass(frozen=True)
class Aggregate:
    columns: tuple[tuple[str, str], ...]  # (view column, the table's column)
    joins: tuple[Join, ...]
    measures: tuple[tuple[str, str], ...]  # (view column, Spark SQL aggregate expression)


def parse_aggregate(where: str, table: str, spec: dict[str, Any]) -> Aggregate:
    columns = spec.get("columns", [])
    if isinstance(columns, list) and _names((c, c) for c in columns):
        pairs = tuple((c, c) for c in columns)
    elif isinstance(columns, dict) and _names(columns.items()):
        pairs = tuple(columns.items())
    else:
        raise ConfigError(
            f"{where}.columns: {table}'s columns the view keeps besides its key, as a list "
            '(["country"]) or an object from the view\'s names to them'
        )
    joins = spec.get("joins")
    if not isinstance(joins, list) or not joins:
        raise ConfigError(
            f"{where}.joins: a list of joins, like "
            '[{"table": "orders", "on": {"customer_id": "customers.id"}}]'
        )
    seen, parsed = [table], []
    for i, doc in enumerate(joins):
        join = _join(f"{where}.joins[{i}]", doc, seen)
        seen.append(join.table)
        parsed.append(join)
    measures = spec.get("measures")
    if not isinstance(measures, dict) or not measures or not _names(measures.items()):
        raise ConfigError(
            f"{where}.measures: an object from the view's names to aggregate expressions, like "
            '{"orders": "count(DISTINCT orders.id)"}'
        )
    clash = {n for n, _ in pairs} & set(measures)
    if clash:
        raise ConfigError(f"{where}.measures.{sorted(clash)[0]}: a column has that name already")
    return Aggregate(pairs, tuple(parsed), tuple(measures.items()))


def _join(where: str, doc: object, seen: list[str]) -> Join:
    if not isinstance(doc, dict):
        raise ConfigError(f'{where}: must be an object like {{"table": "orders", "on": {{...}}}}')
    unknown = sorted(set(doc) - {"table", "on", "optional"})
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown field (known: table, on, optional)")
    table, on, optional = doc.get("table"), doc.get("on"), doc.get("optional", False)
    if not isinstance(table, str) or not table:
        raise ConfigError(f"{where}.table: the captured table it joins, by name")
    if table in seen:
        raise ConfigError(f"{where}.table: {table} is joined already (each table once)")
    if not isinstance(optional, bool):
        raise ConfigError(f"{where}.optional: true (a left join) or false")
    refs = [v.split(".", 1) for v in on.values()] if isinstance(on, dict) else []
    parents = {r[0] for r in refs if len(r) == 2 and r[1]}
    if not isinstance(on, dict) or not on or len(parents) != 1 or len(refs) != len(on):
        raise ConfigError(
            f"{where}.on: an object from {table}'s columns to one joined table's key columns, "
            'like {"customer_id": "customers.id"}'
        )
    (parent,) = parents
    if parent not in seen:
        raise ConfigError(
            f"{where}.on: {parent} is not joined before it (joined: {', '.join(seen)})"
        )
    pairs = tuple((ours, theirs.split(".", 1)[1]) for ours, theirs in on.items())
    return Join(table, parent, pairs, optional)


def _names(pairs: Any) -> bool:
    return all(isinstance(a, str) and a and isinstance(b, str) and b for a, b in pairs)
