"""When each change became visible, from the data alone.

A change is visible in a Delta table from the first commit whose recorded `max_lsn` reaches the
change's LSN (a table's commits apply its topic in order, so `max_lsn` never decreases), and in
an index from the first moment its recorded applied LSN reached it. Freshness is that moment
minus the change's commit time in Postgres (Debezium's `source.ts_ms`).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from changelake import kafka_io
from changelake.bench.stats import summarize


@dataclass(frozen=True)
class Change:
    lsn: int
    committed_ms: int  # Postgres commit time, as Debezium read it
    partition: int = 0  # where its record is in its topic
    offset: int = 0


@dataclass(frozen=True)
class Visible:
    at_ms: int  # a Delta commit's timestamp, or when an index's applied LSN was seen
    max_lsn: int  # everything up to this LSN is visible from at_ms on


def freshness_s(changes: Iterable[Change], moments: Sequence[Visible]) -> list[float]:
    """Seconds from each change's commit to the first moment that made it visible; changes no
    moment covers yet are left out (the caller counts them)."""
    return [seconds for _, seconds in freshness_of(changes, moments)]


def freshness_of(
    changes: Iterable[Change],
    moments: Sequence[Visible],
    position: Callable[[Change], int] = lambda c: c.lsn,
) -> list[tuple[Change, float]]:
    """Each covered change with its freshness in seconds: visible from the first moment whose
    `max_lsn` reaches its `position` (its LSN; for moments read from a streaming checkpoint,
    its offset, see `baseline_stream`)."""
    ordered = sorted(moments, key=lambda m: (m.at_ms, m.max_lsn))
    reach: list[int] = []
    at: list[int] = []
    for m in ordered:  # keep only moments that reach further than every earlier one
        if not reach or m.max_lsn > reach[-1]:
            reach.append(m.max_lsn)
            at.append(m.at_ms)
    out = []
    for change in changes:
        i = bisect.bisect_left(reach, position(change))
        if i < len(reach):
            out.append((change, max(0, at[i] - change.committed_ms) / 1000.0))
    return out


def commits(table_path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(timestamp ms, changelake's commit metadata) of each commit of a local Delta table, in
    version order; read from the log's JSON, so no Spark session is needed."""
    for entry in sorted((table_path / "_delta_log").glob("*.json")):
        for line in entry.read_text().splitlines():
            info = json.loads(line).get("commitInfo")
            if info:
                meta = json.loads(info["userMetadata"]) if info.get("userMetadata") else {}
                yield int(info["timestamp"]), meta


def delta_commits(table_path: Path) -> list[Visible]:
    """Every commit of the table that records how far it applied: a change is visible to every
    reader, `changelake query` and outside ones alike, from the first that reaches it."""
    return [Visible(at, int(m["max_lsn"])) for at, m in commits(table_path) if "max_lsn" in m]


def topic_changes(bootstrap: str, topic: str, start: dict[int, int]) -> list[Change]:
    """The row changes in `topic` from `start` to its current end (tombstones and truncates
    have no row to look for)."""
    changes = []
    for record in kafka_io.read(bootstrap, topic, start, timeout_s=300):
        payload = record.payload
        source = (payload or {}).get("source") or {}
        if payload and payload.get("op") in ("c", "u", "d") and "lsn" in source:
            lsn, at = int(source["lsn"]), int(source["ts_ms"])
            changes.append(Change(lsn, at, record.partition, record.offset))
    return changes


def ends_of(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's end offset now."""
    return {p: high for p, (_, high) in kafka_io.watermarks(bootstrap, topic).items()}


def last_offsets(table: Path) -> dict[int, int]:
    """Per partition, the next offset the table's commits have applied."""
    offsets: dict[int, int] = {}
    for _, meta in commits(table):
        for p, o in (meta.get("offsets") or {}).items():
            offsets[int(p)] = max(int(o), offsets.get(int(p), 0))
    return offsets


def commit_lags(table_path: Path) -> list[tuple[int, float]]:
    """(commit time ms, seconds by which its newest change was already old): the table's lag as
    each commit left it."""
    lags = []
    for at, meta in commits(table_path):
        if meta.get("kind") == "apply" and meta.get("max_source_ts"):
            newest = datetime.fromisoformat(str(meta["max_source_ts"]).replace("Z", "+00:00"))
            lags.append((at, max(0.0, at / 1000 - newest.timestamp())))
    return lags


def table_shape(table_path: Path) -> tuple[list[str], dict[str, object]]:
    """A table's key (from its first commit) and its schema without changelake's own columns."""
    first = (table_path / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    key: list[str] = []
    schema: dict[str, object] = {}
    for line in first:
        action = json.loads(line)
        if "metaData" in action:
            full = json.loads(action["metaData"]["schemaString"])
            fields = [f for f in full["fields"] if not f["name"].startswith("_cdc")]
            schema = {**full, "fields": fields}
        if "commitInfo" in action and action["commitInfo"].get("userMetadata"):
            key = list(json.loads(action["commitInfo"]["userMetadata"]).get("key", []))
    return key, schema


def freshness_figures(
    bootstrap: str,
    tables: Mapping[str, Path],
    ends: Mapping[str, dict[int, int]],
    index: Mapping[str, list[Visible]],
    say: Callable[[str], None],
) -> tuple[dict[str, Any], list[tuple[int, float]]]:
    """The freshness of every change in each topic of `tables` (topic → its base table) after
    `ends`, summarized: in Delta (`delta`), searchable (`search`, from the `index` moments by
    topic); and (commit ms, freshness s) of every change seen."""
    search: list[float] = []
    seen: list[tuple[int, float]] = []
    unseen = 0
    for topic, table in tables.items():
        changes = topic_changes(bootstrap, topic, ends[topic])
        covered = freshness_of(changes, delta_commits(table))
        seen += [(c.committed_ms, seconds) for c, seconds in covered]
        unseen += len(changes) - len(covered)
        if moments := index.get(topic):
            search += freshness_s(changes, moments)
    say(f"bench: freshness from {len(seen):,} changes ({unseen:,} not yet visible)")
    delta = [seconds for _, seconds in seen]
    figures = {
        "delta": summarize(delta).as_dict() if delta else None,
        "search": summarize(search).as_dict() if search else None,
    }
    return figures, seen
