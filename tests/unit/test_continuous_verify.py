"""Continuous verification's pure parts (the next range's bound, what counts as a difference,
the state `status` shows, the share a run is given), and the dropped columns `status` names."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pytest
from psycopg import sql

from changelake.cli import _share
from changelake.read.dropped_columns import dropped
from changelake.read.status_print import verified_line
from changelake.tables import TableRef
from changelake.verify.continuous import FirstCatchUp, _differing
from changelake.verify.ranges import KeyColumn, next_boundary_query
from changelake.verify.verified import record, verified

KEY = [KeyColumn("shop", False), KeyColumn("sku", True)]


def test_the_next_range_ends_a_step_of_rows_past_its_start() -> None:
    query, params = next_boundary_query(sql.Identifier("public", "t"), KEY, (1, "a"), 500)
    text = query.as_string(None)
    assert '("shop", ("sku"::text COLLATE "C")) >= (%s, %s)' in text
    assert text.endswith('ORDER BY "shop", ("sku"::text COLLATE "C") OFFSET 500 LIMIT 1')
    assert params == [1, "a"]
    first, none = next_boundary_query(sql.Identifier("t"), KEY, None, 500)
    assert "WHERE TRUE" in first.as_string(None) and none == []


def test_a_difference_is_a_key_missing_extra_or_held_otherwise() -> None:
    source = {(1,): {"id": 1, "n": "a"}, (2,): {"id": 2, "n": "b"}, (3,): {"id": 3, "n": "c"}}
    lake = {(1,): {"id": 1, "n": "a"}, (2,): {"id": 2, "n": "B"}, (4,): {"id": 4, "n": "d"}}
    assert _differing(source, lake) == {(2,), (3,), (4,)}


def test_a_column_only_the_lake_has_is_no_difference() -> None:
    """A column dropped at the source keeps its values in the lake, by design: a re-send could
    never change that, so it must not be asked for in every pass."""
    source = {(1,): {"id": 1}}
    assert _differing(source, {(1,): {"id": 1, "dropped": "x"}}) == set()
    assert _differing({(1,): {"id": 1, "added": 5}}, {(1,): {"id": 1}}) == {(1,)}


def test_the_state_adds_up_and_status_says_it(tmp_path: Path) -> None:
    record(tmp_path, "orders", resent=2)
    record(tmp_path, "orders", resent=3)
    now = time.time()
    record(tmp_path, "orders", verified_at=now - 90, rows=12_345)
    record(tmp_path, "orders", unrepaired=1)
    state = verified(tmp_path)["orders"]
    assert state["resent"] == 5 and state["rows"] == 12_345 and state["unrepaired"] == 1
    line = verified_line("orders", state, now=now)
    assert line.startswith("verified orders: 90s ago, 12,345 rows; 5 rows re-sent, the last")
    assert "1 rows a re-send cannot mend" in line
    assert verified_line("t", {"resent": 0}, now=now) == "verified t: first pass under way"
    assert verified(tmp_path / "none") == {}


def test_the_share_is_between_none_and_all() -> None:
    assert _share("0") == 0.0 and _share("0.25") == 0.25 and _share("1") == 1.0
    for bad in ("-0.1", "1.5", "often"):
        with pytest.raises(argparse.ArgumentTypeError, match="share from 0 to 1"):
            _share(bad)


def test_a_column_the_source_dropped_is_named_but_not_changelakes_own() -> None:
    lake = ["id", "title", "subject", "_cdc_lsn", "_cdc_deleted", "_kafka_offset"]
    assert dropped(lake, {"id", "subject"}) == ["title"]
    assert dropped(lake, None) == []  # the source could not be read: nothing claimed


def test_a_table_is_compared_once_its_stream_has_caught_up_and_from_then_on() -> None:
    """A run catching up after a restart gets the machine to itself first; once caught up, a
    table stays comparable however far a later burst puts its stream behind."""
    ends = {"t.orders": {"0": 100, "1": 50}}
    applied: dict[str, dict[str, int]] = {"orders": {"0": 100}}
    asked: list[str] = []

    def end_offsets(topic: str) -> dict[str, int]:
        asked.append(topic)
        return dict(ends[topic])

    caught_up = FirstCatchUp(end_offsets, lambda table: applied[table])
    orders = TableRef("public", "orders", "t.orders", "c", "slot")
    assert not caught_up(orders)  # partition 1 not read yet
    ends["t.orders"] = {"0": 900, "1": 900}  # the topic grows meanwhile: the target stays
    applied["orders"] = {"0": 100, "1": 50}
    assert caught_up(orders)
    applied["orders"] = {"0": 100, "1": 50}  # far behind the grown topic now
    assert caught_up(orders) and asked == ["t.orders"]
