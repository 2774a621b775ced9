"""`changelake search "text"`: ranked matches across the indexed tables, matching text marked.

The text is matched against the declared text and keyword fields; `--filter field=value` (or
`<`, `<=`, `>`, `>=` on numeric and date fields) narrows without changing the ranking.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from changelake.exceptions import ConfigError
from changelake.search.client import SearchClient
from changelake.search.config import IndexSpec

_FILTER = re.compile(r"^([^=<>\s]+)\s*(<=|>=|=|<|>)\s*(.*)$")
_RANGE = {"<": "lt", "<=": "lte", ">": "gt", ">=": "gte"}
JSON_TAGS = ("<em>", "</em>")


@dataclass(frozen=True)
class Filter:
    field: str
    kind: str
    op: str
    value: str


@dataclass(frozen=True)
class Hit:
    table: str
    id: str
    score: float
    source: dict[str, Any]
    highlight: dict[str, list[str]]


def parse_filters(specs: list[IndexSpec], given: list[str]) -> list[Filter]:
    kinds: dict[str, str] = {}
    for spec in specs:
        kinds.update(dict(spec.fields))
    filters = []
    for text in given:
        m = _FILTER.match(text.strip())
        if m is None:
            raise ConfigError(f"--filter {text}: expected field=value (or <, <=, >, >=)")
        field, op, value = m.groups()
        if field not in kinds:
            raise ConfigError(
                f"--filter {text}: no indexed field {field}",
                f"fields: {', '.join(sorted(kinds))} (from schemas/search.json)",
            )
        kind = kinds[field]
        if op != "=" and kind not in ("numeric", "date"):
            raise ConfigError(f"--filter {text}: {field} is {kind}; only = applies")
        filters.append(Filter(field, kind, op, _value(text, kind, value)))
    return filters


def _value(text: str, kind: str, value: str) -> str:
    if kind == "boolean" and value.lower() not in ("true", "false"):
        raise ConfigError(f"--filter {text}: a boolean field takes true or false")
    if kind == "numeric":
        try:
            Decimal(value)
        except ArithmeticError:
            raise ConfigError(f"--filter {text}: not a number: {value!r}") from None
    return value.lower() if kind == "boolean" else value


def _clause(f: Filter) -> dict[str, Any]:
    if f.op != "=":
        return {"range": {f.field: {_RANGE[f.op]: f.value}}}
    if f.kind == "text":
        return {"match": {f.field: {"query": f.value, "operator": "and"}}}
    return {"term": {f.field: f.value}}


def build_query(
    text: str, specs: list[IndexSpec], filters: list[Filter], limit: int, tags: tuple[str, str]
) -> dict[str, Any]:
    """The search request body (pure, so it is unit-tested)."""
    fields = sorted({c for s in specs for c in s.of_kind("text", "keyword")})
    must: dict[str, Any] = (
        {"multi_match": {"query": text, "fields": fields, "lenient": True}}
        if text.strip()
        else {"match_all": {}}
    )
    return {
        "size": limit,
        "track_total_hits": True,
        "query": {"bool": {"must": [must], "filter": [_clause(f) for f in filters]}},
        "highlight": {
            "highlight_query": must,  # the words searched for, not the filters
            "pre_tags": [tags[0]],
            "post_tags": [tags[1]],
            "fields": {c: {"number_of_fragments": 2, "fragment_size": 150} for c in fields},
        },
    }


def search(
    client: SearchClient,
    aliases: dict[str, IndexSpec],
    text: str,
    filters: list[str],
    limit: int,
    tags: tuple[str, str],
) -> tuple[int, list[Hit]]:
    """(total matches, the best `limit`), over the indexes behind `aliases` (alias → spec)."""
    owner = {}
    for alias, spec in aliases.items():
        for index in client.alias_indexes(alias):
            owner[index] = spec.table
    if not owner:
        names = ", ".join(s.table for s in aliases.values())
        raise ConfigError(
            f"no search index exists yet for {names}",
            "`changelake run` builds it (or `changelake reindex --tables TABLE`)",
        )
    specs = list(aliases.values())
    body = build_query(text, specs, parse_filters(specs, filters), limit, tags)
    found = client.request("POST", f"/{','.join(aliases)}/_search?ignore_unavailable=true", body)
    hits = [
        Hit(
            owner.get(h["_index"], h["_index"]),
            h["_id"],
            float(h["_score"] or 0),
            h["_source"],
            h.get("highlight", {}),
        )
        for h in found["hits"]["hits"]
    ]
    return int(found["hits"]["total"]["value"]), hits


def format_json(total: int, hits: list[Hit]) -> str:
    doc = {"total": total, "hits": [h.__dict__ for h in hits]}
    return json.dumps(doc, indent=2, ensure_ascii=False, default=_exact)


def _exact(value: Any) -> str:
    if isinstance(value, Decimal):
        return str(value)  # exact digits, as `query --json` gives decimals
    raise TypeError(type(value).__name__)


def format_text(text: str, total: int, hits: list[Hit], specs: dict[str, IndexSpec]) -> str:
    shown = f"{len(hits)} of {total:,}" if total > len(hits) else f"{total:,}"
    lines = [f'{shown} matches for "{text}"' if text.strip() else f"{shown} documents"]
    for rank, hit in enumerate(hits, 1):
        lines.append(f"{rank:>3}. {hit.table}  {hit.id}  (score {hit.score:.2f})")
        spec = specs[hit.table]
        for column, fragments in hit.highlight.items():
            lines.append(f"       {column}: {' … '.join(f.strip() for f in fragments)}")
        rest = [
            f"{c}={_short(hit.source.get(c))}"
            for c, kind in spec.fields
            if c not in hit.highlight and (kind != "text" or len(str(hit.source.get(c))) <= 60)
        ]
        if rest:
            lines.append("       " + "  ".join(rest))
    return "\n".join(lines)


def _short(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    text = (
        "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    )
    return text if len(text) <= 60 else text[:57] + "…"
