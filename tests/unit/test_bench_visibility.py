"""Freshness from the data: each change against the first commit that covers its LSN."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from changelake.bench.visibility import Change, Visible, delta_commits, freshness_s


def test_a_change_is_visible_from_the_first_commit_reaching_its_lsn() -> None:
    commits = [Visible(10_000, 100), Visible(12_000, 250), Visible(15_500, 400)]
    changes = [Change(90, 9_000), Change(100, 9_500), Change(101, 9_900), Change(400, 15_000)]
    assert freshness_s(changes, commits) == pytest.approx([1.0, 0.5, 2.1, 0.5])


def test_changes_beyond_every_commit_are_left_out_and_order_does_not_matter() -> None:
    commits = [Visible(12_000, 250), Visible(10_000, 100), Visible(11_000, 90)]
    assert freshness_s([Change(95, 9_000), Change(251, 11_000)], commits) == [1.0]


def test_a_clock_skew_never_gives_negative_freshness() -> None:
    assert freshness_s([Change(5, 10_400)], [Visible(10_000, 5)]) == [0.0]


def test_delta_commits_are_read_from_the_log_with_their_lsn(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    meta = json.dumps({"changelake": 1, "max_lsn": 777, "offsets": {"0": 3}})
    lines = [
        {"commitInfo": {"timestamp": 1_000, "userMetadata": meta}},
        {"add": {"path": "part-0.parquet"}},
    ]
    (log / "00000000000000000000.json").write_text("\n".join(json.dumps(x) for x in lines))
    (log / "00000000000000000001.json").write_text(json.dumps({"commitInfo": {"timestamp": 2}}))
    assert delta_commits(tmp_path) == [Visible(1_000, 777)]
