"""What production does to a replication slot, each named in one sentence with what to do: the
slot missing (dropped, or left behind by a failover), invalidated, re-created after the
connector's position, and a source restored or replaced; `status` shows each as its tables
`stalled`, a problem line and exit 3, as it shows Debezium's "no longer available"."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from changelake.capture.capture_health import Stall, problem_lines, stall_of
from changelake.capture.slot_trouble import SlotLook, stored_lsn, trouble_of
from changelake.capture.source_identity import Identity, remember, remembered
from changelake.read.status import STALLED, UNHEALTHY, exit_code, with_capture
from tests.unit.test_capture_health import GONE, _status

HERE = Identity("7713416105510311725", 1)
HEALTHY = SlotLook(
    "changelake_shop", "db:5432/shop", True, 1_000, "reserved", None, False, 2_000, HERE
)
GONE_SLOT = replace(HEALTHY, exists=False, confirmed_lsn=None, wal_status=None)


def _trouble(
    look: SlotLook, offset: int | None = 1_000, lake: int | None = 900, known: Identity = HERE
) -> Stall | None:
    return trouble_of("shop", look, offset, lake, known)


def test_a_healthy_slot_and_one_not_created_yet_are_no_trouble() -> None:
    assert _trouble(HEALTHY) is None
    assert _trouble(replace(HEALTHY, confirmed_lsn=900)) is None  # behind its offset: normal
    assert _trouble(GONE_SLOT, offset=None, lake=None) is None  # the connector makes it


def test_a_dropped_slot_is_named_with_the_position_lost_and_the_commands() -> None:
    stall = _trouble(GONE_SLOT)
    assert stall is not None and stall.cause == "slot_missing"
    assert "replication slot changelake_shop is gone from db:5432/shop (dropped)" in stall.sentence
    assert "since 0/3E8" in stall.sentence
    assert "`changelake run` re-syncs it by itself" in stall.next_step


def test_a_slot_gone_with_a_new_timeline_is_a_failover() -> None:
    stall = _trouble(replace(GONE_SLOT, identity=replace(HERE, timeline=2)))
    assert stall is not None and stall.cause == "failover"
    assert "moved to timeline 2 (it was on 1" in stall.sentence
    assert "PostgreSQL 17" in stall.sentence


@pytest.mark.parametrize(
    ("wal_status", "reason", "said"),
    [("lost", None, "wal_status lost"), ("lost", "wal_removed", "wal_removed")],
)
def test_an_invalidated_slot_says_why(wal_status: str, reason: str | None, said: str) -> None:
    stall = _trouble(replace(HEALTHY, wal_status=wal_status, invalidation_reason=reason))
    assert stall is not None and stall.cause == "slot_invalidated"
    assert f"was invalidated ({said})" in stall.sentence
    assert "max_slot_wal_keep_size" in stall.sentence


def test_a_slot_made_again_after_the_connector_s_position_lost_the_changes_between() -> None:
    stall = _trouble(replace(HEALTHY, confirmed_lsn=5_000), offset=1_000)
    assert stall is not None and stall.cause == "slot_recreated"
    assert "starts at 0/1388, after 0/3E8 where shop stopped" in stall.sentence
    assert _trouble(replace(HEALTHY, confirmed_lsn=5_000), offset=None) is None  # unknown
    # Read by a running connector, a slot is flushed past the stored offset for a while (records
    # acked while Connect wrote its offsets): no sign of a slot made again.
    assert _trouble(replace(HEALTHY, confirmed_lsn=5_000, active=True), offset=1_000) is None


def test_a_source_behind_the_lake_or_another_database_is_a_restore_not_a_resync() -> None:
    behind = _trouble(replace(HEALTHY, current_lsn=500), lake=900)
    assert behind is not None and behind.cause == "source_behind_lake"
    assert "at WAL 0/1F4, behind 0/384 which the lake already applied" in behind.sentence
    assert "stop `changelake run`" in behind.next_step
    assert "`changelake connectors rebuild shop`" in behind.next_step
    other = _trouble(replace(HEALTHY, identity=Identity("42", 1)))
    assert other is not None and other.cause == "source_replaced"
    assert "system identifier 42, was 7713416105510311725" in other.sentence
    # Without a remembered database, or one this role may not read, nothing is compared.
    assert (
        trouble_of("shop", replace(HEALTHY, identity=Identity("42", 1)), 1_000, 900, None) is None
    )
    unread = _trouble(replace(GONE_SLOT, identity=None))
    assert unread is not None and unread.cause == "slot_missing"


def test_the_offset_connect_stored_is_its_furthest_lsn() -> None:
    offsets = {
        "offsets": [
            {
                "partition": {"server": "shop"},
                "offset": {"lsn_proc": 244, "lsn_commit": 240, "lsn": 243, "txId": 7750},
            }
        ]
    }
    assert stored_lsn(offsets) == 244
    assert stored_lsn({"offsets": []}) is None
    assert stored_lsn(None) is None


def test_status_names_each_cause_and_exits_unhealthy() -> None:
    connector_of = {"orders": "shop", "lines": "shop"}
    causes = {
        "missing": _trouble(GONE_SLOT),
        "invalidated": _trouble(replace(HEALTHY, wal_status="lost")),
        "failover": _trouble(replace(GONE_SLOT, identity=replace(HERE, timeline=2))),
        "restore": _trouble(replace(HEALTHY, current_lsn=500)),
        "no longer available": stall_of("shop", _status("RUNNING", ("FAILED", GONE))),
    }
    for said, stall in causes.items():
        assert stall is not None, said
        (line,) = problem_lines({"shop": stall}, connector_of)
        assert line.startswith(f"capture stalled: {stall.sentence}; tables lines, orders")
        shown = with_capture({"state": "running", "error": None}, stall)
        assert shown["state"] == STALLED and shown["error"] == stall.sentence
        report = {"pipeline": {"running": True}, "tables": {"orders": shown}, "problems": [line]}
        assert exit_code(report) == UNHEALTHY


def test_the_database_a_connector_was_applied_to_is_remembered_until_it_is_deleted(
    tmp_path: Path,
) -> None:
    assert remembered(tmp_path) == {}
    remember(tmp_path, "shop", HERE)
    remember(tmp_path, "other", Identity("1", 3))
    assert remembered(tmp_path) == {"shop": HERE, "other": Identity("1", 3)}
    remember(tmp_path, "shop", None)
    assert remembered(tmp_path) == {"other": Identity("1", 3)}
