"""Merge-on-write's file pruning: the changed keys as few ranges, split where they lie furthest
apart, so a round of inserts at a table's end and updates of its oldest rows reads the files at
both ends and none between (changelake/sinks/merge_on_write.py)."""

from __future__ import annotations

from changelake.sinks.merge_on_write import MOST_RANGES, range_cuts


def _runs(values: list[int]) -> list[tuple[int, int]]:
    cuts = range_cuts(values)
    bounds = zip([0, *cuts], [*cuts, len(values)], strict=True)
    return [(values[a], values[b - 1]) for a, b in bounds]


def test_keys_at_both_ends_are_two_ranges_not_one_spanning_the_table() -> None:
    values = [*range(1, 1001), *range(999_000, 1_000_001)]
    runs = _runs(values)
    assert len(runs) == MOST_RANGES
    assert not any(a <= 1000 < 999_000 <= b for a, b in runs)  # no range spans the gap
    assert runs[0][0] == 1 and runs[-1][1] == 1_000_000


def test_few_keys_are_a_range_each_and_text_splits_evenly() -> None:
    assert _runs([3, 7, 9]) == [(3, 3), (7, 7), (9, 9)]
    words = [f"k{i:04}" for i in range(100)]
    cuts = range_cuts(words)
    assert len(cuts) == MOST_RANGES - 1 and cuts == sorted(cuts)
    assert _runs([5]) == [(5, 5)]
