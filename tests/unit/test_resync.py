"""A re-sync's pure parts: where Connect's stored offset is moved to, which slot troubles start
one (and not under CHANGELAKE_RESYNC=manual), and how the run's watch shows one and its end."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from changelake.apply import capture_watch, resync
from changelake.apply.capture_watch import CaptureWatch
from changelake.apply.pipeline_file import TableState
from changelake.apply.resync import Resyncs
from changelake.apply.run_state import TableJob
from changelake.capture.capture_health import Stall
from changelake.capture.gap_deletes import delete_event, key_values, row_lsn
from changelake.capture.resync import moved
from changelake.settings import Settings
from changelake.tables import TableRef

STORED = {
    "transaction_id": "4592",
    "lsn_proc": 225411552,
    "lsn_commit": 225411552,
    "lsn": 225411552,
    "txId": 4592,
    "ts_usec": 1795997253956283,
    "messageType": "COMMIT",
    "lsn_events_processed": 3,
    "incremental_snapshot_correlation_id": "abc",
    "incremental_snapshot_primary_key": "xyz",
}


def test_the_stored_offset_moves_to_the_new_slot_keeping_the_rest() -> None:
    body = moved([{"partition": {"server": "shop"}, "offset": STORED}], 999, "shop")
    (entry,) = body["offsets"]
    assert entry["partition"] == {"server": "shop"}
    offset = entry["offset"]
    assert offset["lsn"] == offset["lsn_proc"] == offset["lsn_commit"] == 999
    assert offset["txId"] == 4592 and offset["ts_usec"] == 1795997253956283
    # What belonged to the old slot's position: a snapshot running then, events counted at it.
    assert not [k for k in offset if k.startswith("incremental_snapshot")]
    assert "lsn_events_processed" not in offset


def test_a_connector_with_no_stored_offset_gets_one_for_its_partition() -> None:
    (entry,) = moved([], 42, "orders")["offsets"]
    assert entry["partition"] == {"server": "orders"}
    assert entry["offset"]["lsn"] == 42 and entry["offset"]["ts_usec"] > 0


def _job(name: str, connector: str = "shop") -> TableJob:
    return TableJob(
        TableRef("public", name, f"shop.public.{name}", connector, "slot"),
        state=TableState.RUNNING,
    )


@pytest.fixture
def run_settings(settings: Settings, tmp_path: Path) -> Settings:
    (tmp_path / "run").mkdir()
    return dataclasses.replace(settings, home=tmp_path)


def _started(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    started: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(Resyncs, "_run", lambda self, c, entry: started.append((c, entry)))
    return started


def test_a_lost_slot_starts_one_resync_and_a_restore_none(
    run_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = _started(monkeypatch)
    jobs = {"orders": _job("orders"), "items": _job("items", "other")}
    resyncs = Resyncs(run_settings, jobs, print, lambda _: None)
    dropped = Stall("shop", "slot gone", "it re-syncs", "slot_missing")
    restored = Stall("other", "behind the lake", "rebuild", "source_behind_lake")
    resyncs.want({"shop": dropped, "other": restored})
    assert started and started[0][0] == "shop" and started[0][1] == {"cause": "slot gone"}
    assert len(started) == 1  # a restore is rebuilt by a person: never mixed by a re-sync


def test_manual_starts_none(run_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    started = _started(monkeypatch)
    manual = dataclasses.replace(run_settings, resync=False)
    resyncs = Resyncs(manual, {"orders": _job("orders")}, print, lambda _: None)
    resyncs.want({"shop": Stall("shop", "slot gone", "it re-syncs", "slot_missing")})
    assert started == []


def test_a_resync_a_killed_run_began_goes_on(
    run_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = _started(monkeypatch)
    begun = {"cause": "slot gone", "lsn": 7, "xmax": 9, "signal": "s", "since": {"0": 3}}
    resync._save(run_settings.run_dir, "shop", begun)
    resyncs = Resyncs(run_settings, {"orders": _job("orders")}, print, lambda _: None)
    resyncs.want({})  # no trouble seen any more: the slot is new, its snapshot not yet applied
    assert started == [("shop", begun)]


def test_the_watch_shows_a_resync_and_says_when_capture_runs_again(
    run_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    jobs = {"orders": _job("orders")}
    looks = iter([{"shop": Stall("shop", "slot gone", "it re-syncs", "slot_missing")}, {}, {}])
    monkeypatch.setattr(capture_watch, "slot_troubles", lambda *_: next(looks))
    clock = iter(range(0, 1000, 20))
    made: list[Resyncs] = []

    def factory(forget: Any) -> Resyncs:
        made.append(Resyncs(run_settings, jobs, said.append, forget))
        return made[0]

    started = _started(monkeypatch)
    watch = CaptureWatch(run_settings, said.append, jobs, factory, lambda: float(next(clock)))
    watch.restarts.next_check = float("inf")  # Connect's look is test_capture_health's
    assert watch.tick()
    assert started and watch.stalled()["orders"].cause == "resync"
    assert "re-syncing shop (starting) after: slot gone" in watch.stalled()["orders"].sentence
    made[0]._say("shop", "snapshot")  # where it stands: the state file says it too
    assert watch.tick()
    assert "(snapshot)" in watch.stalled()["orders"].sentence
    with made[0]._lock:  # the re-sync ends: its thread forgets the trouble seen meanwhile
        made[0].phases.clear()
    made[0].begun.pop("shop")
    made[0].forget("shop")
    assert watch.tick() and watch.stalled() == {}
    assert said[-1] == "capture running again: connector shop feeds orders"
    # Said once, with its cause, when it began; its phases are not said as new stalls.
    (stalled,) = [line for line in said if "capture stalled" in line]
    assert stalled == "capture stalled: slot gone; re-syncing shop"


LEAN_ROW = (
    b'{"before":null,"after":{"id":7,"balance":7824.30,"name":"na\\u00efve \xc3\xa9"},'
    b'"source":{"version":"3.7.0.Final","lsn":1500,"txId":4592,"ts_ms":1,"ts_us":1000,'
    b'"snapshot":"false","sequence":"[\\"1400\\",\\"1500\\"]"},'
    b'"transaction":{"id":"4592:1500","total_order":1},"op":"u","ts_ms":2}'
)


def test_a_key_s_newest_row_position_is_read_from_the_envelope_s_tail() -> None:
    assert row_lsn(LEAN_ROW) == 1500
    # An incremental snapshot's read has no lsn: its streaming position is its sequence's.
    read = LEAN_ROW.replace(b'"lsn":1500', b'"lsn":null').replace(b'"op":"u"', b'"op":"r"')
    assert row_lsn(read) == 1500
    assert row_lsn(LEAN_ROW.replace(b'"op":"u"', b'"op":"d"')) is None  # deleted already
    assert row_lsn(None) is None  # a tombstone
    inline = b'{"schema":{"type":"struct","fields":[{"field":"source"}]},"payload":' + LEAN_ROW
    assert row_lsn(inline + b"}") == 1500


def test_the_gap_s_delete_is_the_row_s_last_image_at_the_slot_s_lsn() -> None:
    event = json.loads(delete_event(LEAN_ROW, 9000, 1_700_000_000_000))
    assert event["op"] == "d" and event["after"] is None
    assert event["before"]["id"] == 7 and event["before"]["name"] == "naïve é"
    assert event["source"]["lsn"] == 9000 and event["source"]["txId"] is None
    assert event["source"]["ts_us"] == 1_700_000_000_000_000 and event["ts_ms"] == 1_700_000_000_000
    assert event["transaction"] is None  # no transaction of the source's: no read waits for it
    # Numbers as the record held them: a decimal keeps its trailing zero.
    assert b'"balance":7824.30' in delete_event(LEAN_ROW, 9000, 0)
    inline = b'{"schema":{"type":"struct"},"payload":' + LEAN_ROW + b"}"
    wrapped = json.loads(delete_event(inline, 9000, 0))
    assert wrapped["schema"] == {"type": "struct"} and wrapped["payload"]["op"] == "d"


def test_a_key_s_columns_and_values_come_from_its_payload() -> None:
    key = b'{"schema":{"type":"struct"},"payload":{"order_id":12,"line_no":3}}'
    assert key_values(key) == (["order_id", "line_no"], (12, 3))
