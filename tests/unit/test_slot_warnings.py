"""`status` warns about a replication slot past the lag threshold, and says what to do."""

from __future__ import annotations

from typing import Any

from changelake.capture.slot_status import slot_warnings

GIB = 1 << 30
OWNERS = {"changelake_shop": "shop-postgres"}


def slot(lag: int | None, *, active: bool | None = True, exists: bool | None = True) -> Any:
    return {"exists": exists, "slot_lag_bytes": lag, "active": active}


def test_a_slot_at_or_below_the_threshold_is_fine() -> None:
    slots = {"changelake_shop": slot(GIB), "other": slot(0)}
    assert slot_warnings(slots, GIB, OWNERS) == []


def test_an_active_slot_above_the_threshold_names_slot_lag_threshold_and_variable() -> None:
    (warning,) = slot_warnings({"changelake_shop": slot(3 * GIB // 2)}, GIB, OWNERS)
    assert warning.startswith(
        "slot changelake_shop holds 1.5 GiB of WAL Debezium has not confirmed,"
        " over the 1.0 GiB set by CHANGELAKE_SLOT_LAG_WARN_BYTES. "
    )
    assert "shop-postgres reads it but confirms slowly" in warning
    assert "`changelake connectors status`" in warning
    assert "max_slot_wal_keep_size" in warning and "INACTIVE" not in warning


def test_an_inactive_slot_says_no_connector_reads_it_and_how_to_drop_it() -> None:
    (warning,) = slot_warnings({"changelake_shop": slot(2 * GIB, active=False)}, GIB, OWNERS)
    assert "slot changelake_shop holds 2.0 GiB" in warning
    assert "INACTIVE, no connector is reading it" in warning
    assert "`changelake connectors delete shop-postgres --drop-slot`" in warning
    assert "pg_drop_replication_slot('changelake_shop')" in warning


def test_without_owners_the_command_shows_a_placeholder() -> None:
    (warning,) = slot_warnings({"s": slot(2048, active=False)}, 1024)
    assert "slot s holds 2.0 KiB" in warning and "over the 1.0 KiB set by" in warning
    assert "`changelake connectors delete NAME --drop-slot`" in warning


def test_unknown_or_missing_slots_are_left_to_their_own_lines() -> None:
    slots = {
        "unknown": slot(None, active=None, exists=None),  # Postgres did not answer
        "missing": slot(None, active=False, exists=False),  # the connector has not created it
    }
    assert slot_warnings(slots, 0) == []
    assert slot_warnings({}, 0) == []


def test_one_warning_per_slot_over_the_threshold_in_name_order() -> None:
    slots = {"b": slot(5 * GIB), "a": slot(GIB + 1, active=False), "c": slot(10)}
    warnings = slot_warnings(slots, GIB)
    assert [w.split()[1] for w in warnings] == ["a", "b"]


def test_a_table_far_behind_its_source_is_a_problem() -> None:
    from changelake.read.status import BEHIND_S, behind_source

    tables = {
        "fresh": {"lag_s": BEHIND_S, "lag_changes": 10},
        "late": {"lag_s": BEHIND_S + 16, "lag_changes": 1234},
        "unknown": {"lag_s": None, "lag_changes": None},
    }
    found = behind_source(tables)
    assert len(found) == 1 and found[0].startswith("late: 76s behind its source")
    assert "1,234 changes waiting" in found[0] and "--trigger-seconds" in found[0]
