"""The views phase's freshness, from the data alone: a change is in a history from the first
commit whose files' statistics reach its Kafka offset, and in an aggregate view from the first
round that recorded an offset past it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from changelake.bench.views_phase import by_offset, history_moments, recorded_offsets, views_section
from changelake.bench.visibility import Change


def _commit(log: Path, version: int, at: int, *actions: dict[str, object]) -> None:
    info: dict[str, object] = {"timestamp": at, **(actions[0] if actions else {})}
    lines: list[dict[str, object]] = [{"commitInfo": info}, *actions[1:]]
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(x) for x in lines))


def _add(high: int) -> dict[str, object]:
    stats = {"numRecords": 3, "maxValues": {"_kafka_offset": high, "_cdc_lsn": 10**9}}
    return {"add": {"path": f"part-{high}.parquet", "stats": json.dumps(stats)}}


def test_a_history_shows_a_change_from_the_commit_holding_its_offset(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    _commit(log, 0, 1_000, {}, _add(4), _add(9))  # the seed and a batch: offsets up to 9
    _commit(log, 1, 2_000, {})  # a commit adding no file (a schema change) shows nothing new
    _commit(log, 2, 3_500, {}, _add(20))
    moments = history_moments(tmp_path)
    changes = [Change(0, 500, 0, 9), Change(0, 900, 0, 10), Change(0, 3_000, 0, 20)]
    assert by_offset(changes, moments) == pytest.approx([0.5, 2.6, 0.5])
    assert by_offset([Change(0, 3_000, 0, 21)], moments) == []  # not shown yet: left out


def test_an_aggregate_shows_a_change_from_the_round_recording_an_offset_past_it(
    tmp_path: Path,
) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    for version, (at, offset) in enumerate([(1_000, 5), (31_000, 50)]):
        doc = {"changelake_view": 1, "tables": {"orders": {"offsets": {"0": offset}}}}
        _commit(log, version, at, {"userMetadata": json.dumps(doc)})
    recorded = recorded_offsets(tmp_path)
    assert recorded == [(1_000, {"orders": {"0": 5}}), (31_000, {"orders": {"0": 50}})]


def test_the_views_section_shows_the_cost_and_each_view() -> None:
    summary = {"count": 4, "p50": 1.5, "p95": 2.0, "p99": 2.5, "max": 3.0}
    figures = {
        "rate": 250.0,
        "without": {"delta": summary},
        "with": {"delta": {**summary, "p50": 2.5}},
        "views": {"customer_revenue": {"kind": "aggregate", **summary, "p50": 31.0}},
    }
    text = "\n".join(views_section(figures))
    assert "## Derived views" in text and "customer_revenue" in text and "31.0" in text
    assert views_section(None) == []
