"""The streaming baseline's freshness and lag, read from its queries' checkpoints."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from changelake.bench.baseline_stream import BatchEnd, batch_ends, freshness, lags, read_to
from changelake.bench.visibility import Change


def _batch(checkpoint: Path, number: int, at_ms: int, ends: dict[str, dict[str, int]]) -> None:
    """A batch as Spark checkpoints it: its offsets file, then its commit file once done."""
    for folder in ("offsets", "commits"):
        (checkpoint / folder).mkdir(parents=True, exist_ok=True)
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": at_ms}
    (checkpoint / "offsets" / str(number)).write_text(f"v1\n{json.dumps(meta)}\n{json.dumps(ends)}")
    commit = checkpoint / "commits" / str(number)
    commit.write_text('v1\n{"nextBatchWatermarkMs":0}')
    os.utime(commit, (at_ms / 1000, at_ms / 1000))


def test_batch_ends_come_from_committed_batches_only_in_time_order(tmp_path: Path) -> None:
    _batch(tmp_path, 1, 5_000, {"t": {"0": 40}})
    _batch(tmp_path, 0, 2_000, {"t": {"0": 10}, "other": {"0": 99}})
    (tmp_path / "offsets" / "2").write_text('v1\n{}\n{"t":{"0":70}}')  # running: no commit yet
    (tmp_path / "commits" / ".1.crc").write_text("")  # Hadoop's checksum files are no batches
    assert batch_ends(tmp_path, "t") == [BatchEnd(2_000, {0: 10}), BatchEnd(5_000, {0: 40})]


def test_a_change_is_visible_from_the_first_batch_that_read_past_its_offset() -> None:
    ends = [BatchEnd(2_000, {0: 10}), BatchEnd(5_000, {0: 40})]
    changes = [Change(1, 1_500, 0, 9), Change(2, 1_800, 0, 10), Change(3, 4_000, 0, 39)]
    unseen = Change(4, 4_500, 0, 40)
    found = freshness([*changes, unseen], ends)
    assert [c.offset for c, _ in found] == [9, 10, 39]
    assert [s for _, s in found] == pytest.approx([0.5, 3.2, 1.0])


def test_partitions_are_judged_by_their_own_offsets() -> None:
    ends = [BatchEnd(3_000, {0: 5, 1: 2})]
    changes = [Change(1, 1_000, 0, 4), Change(2, 1_000, 1, 4)]  # partition 1 not read that far
    assert [c.partition for c, _ in freshness(changes, ends)] == [0]


def test_lag_is_the_age_of_the_newest_change_a_batch_had_read() -> None:
    ends = [BatchEnd(2_000, {0: 2}), BatchEnd(6_000, {0: 3}), BatchEnd(9_000, {0: 3})]
    changes = [Change(1, 1_000, 0, 0), Change(2, 1_500, 0, 1), Change(3, 5_000, 0, 2)]
    assert lags(changes, ends, 0, 10_000) == [(2_000, 0.5), (6_000, 1.0), (9_000, 4.0)]
    assert lags(changes, ends, 3_000, 8_000) == [(6_000, 1.0)]


def test_caught_up_once_the_newest_batch_read_every_partition_to_its_end() -> None:
    marks = {0: (0, 40), 1: (7, 7)}  # partition 1 holds nothing
    assert read_to([BatchEnd(1, {0: 10}), BatchEnd(2, {0: 40})], marks)
    assert not read_to([BatchEnd(1, {0: 39})], marks)
    assert not read_to([BatchEnd(1, {0: 40})], {**marks, 2: (0, 3)})  # a partition never read
    assert not read_to([], marks)
    assert read_to([], {1: (7, 7)})
