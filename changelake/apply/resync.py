"""A run re-syncing a connector whose replication slot lost changes, with nobody asked: capture
started again from a new slot (`capture.resync`), every keyed table it feeds snapshotted again
through an incremental snapshot while streaming goes on, and, once Debezium has sent it, the rows
deleted during the gap deleted through the log (`capture.gap_deletes`): the pipeline applies
them like any change.

Where a re-sync stands is kept in `resync.json` in the run directory, so a run killed during one
finishes it when it starts again (the snapshot is awaited from the offsets topic's position the
file records; a key deleted already is not deleted again: its newest record is the delete).
`CHANGELAKE_RESYNC=manual` turns this off: the tables stay `stalled`, and `status` says how to
re-sync once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from changelake import jsonfile, kafka_io, run_log
from changelake.apply.run_state import TableJob
from changelake.capture.capture_health import Stall
from changelake.capture.connect_api import ConnectApi
from changelake.capture.connect_offsets import offsets_end
from changelake.capture.gap_deletes import (
    absent_at_source,
    delete_keys,
    key_values,
    stale_keys,
)
from changelake.capture.resend import Asked, send, settle
from changelake.capture.resync import (
    RESYNC_CAUSES,
    Whole,
    old_transactions_over,
    restart_capture,
)
from changelake.capture.slot_trouble import slot_troubles
from changelake.exceptions import ChangelakeError, first_line
from changelake.pg import pg_lsn
from changelake.settings import Settings
from changelake.tables import TableRef, source_of_table
from changelake.waiting import wait_until

STATE_FILE = "resync.json"
SNAPSHOT_TIMEOUT_S = 6 * 3600.0  # a whole database sent again, at a few thousand rows a second
APPLIED_TIMEOUT_S = 3600.0  # for the stream to apply what the snapshot sent
OLD_TRANSACTIONS_S = 600.0
RETRY_S = 60.0  # a re-sync that failed is tried again this long after
Out = Callable[[str], None]
_SAVING = threading.Lock()


def gap_deletes(settings: Settings, refs: list[TableRef], entry: dict[str, Any], out: Out) -> int:
    """Once a begun re-sync's snapshot is sent: its keyed tables' rows deleted during the gap,
    deleted through their topics; how many."""
    source = source_of_table(settings, refs[0])
    if not old_transactions_over(source, int(entry["xmax"]), OLD_TRANSACTIONS_S):
        out(
            run_log.warning(
                f"re-sync of {refs[0].connector}: a transaction older than the new slot still"
                f" runs after {OLD_TRANSACTIONS_S:.0f}s; looking for deleted rows regardless"
            )
        )
    lsn, bootstrap, deleted = int(entry["lsn"]), settings.kafka_bootstrap, 0
    for ref in (r for r in refs if not r.events):
        stale = stale_keys(bootstrap, ref.topic, lsn)
        parsed = {k: key_values(k) for k in stale}
        if not parsed:
            continue
        columns = next(iter(parsed.values()))[0]
        found = [values for _, values in parsed.values()]
        gone = set(absent_at_source(source.dsn(), ref, columns, found))
        keys = [k for k, (_, values) in parsed.items() if values in gone]
        delete_keys(bootstrap, ref.topic, stale, keys, lsn)
        deleted += len(keys)
    return deleted


def resync_once(settings: Settings, refs: list[TableRef], out: Out) -> None:
    """`run --once`, before it waits for capture: each re-sync its tables' connectors need
    (their slot lost changes, or a killed run left one begun) done as far as the log goes:
    capture started again, the snapshot sent, the gap's deletes written. The run's pass then
    applies them, so a run that ends, ends re-synced."""
    if not settings.resync:
        return
    found = pending(settings.run_dir)
    for connector, stall in slot_troubles(settings, refs, {}).items():
        if stall.cause in RESYNC_CAUSES and connector not in found:
            out(run_log.warning(f"capture stalled: {stall.sentence}; re-syncing {connector}"))
            found[connector] = {"cause": stall.sentence}
    for connector, entry in found.items():
        if fed := [r for r in refs if r.connector == connector]:
            begun = entry if entry.get("lsn") is not None else begin(settings, fed, entry, out)
            resent = [asked(settings, fed, begun)] if begun["signal"] else []
            settle(settings.kafka_bootstrap, resent, SNAPSHOT_TIMEOUT_S, out, _beat(settings, fed))
            deleted = gap_deletes(settings, fed, begun, out)
            _save(settings.run_dir, connector, None)
            out(f"re-sync of {connector} done: {deleted:,} rows deleted during the gap deleted")


def _beat(settings: Settings, refs: list[TableRef]) -> dict[str, str]:
    """The connector's heartbeat query, which moves a quiet one on (see `resend.settle`)."""
    return {refs[0].connector: source_of_table(settings, refs[0]).heartbeat_query}


def state_path(run_dir: Path) -> Path:
    return run_dir / STATE_FILE


def pending(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Per connector, the re-sync a run began and has not finished."""
    path = state_path(run_dir)
    return dict(jsonfile.read(path)) if path.exists() else {}


def abandon(run_dir: Path, connector: str) -> None:
    """The connector's unfinished re-sync forgotten: capture was made again from nothing."""
    _save(run_dir, connector, None)


def _save(run_dir: Path, connector: str, entry: dict[str, Any] | None) -> None:
    with _SAVING:  # two connectors' re-syncs, each reading and writing the one file
        found = pending(run_dir)
        if entry is None:
            found.pop(connector, None)
        else:
            found[connector] = entry
        jsonfile.write_atomically(state_path(run_dir), found)


def begin(
    settings: Settings, refs: list[TableRef], entry: dict[str, Any], out: Out
) -> dict[str, Any]:
    """Capture of the connector feeding `refs` started again from a new slot, and its keyed
    tables asked for again; recorded before and after, so a killed run goes on from the file."""
    connector = refs[0].connector
    keyed = [r for r in refs if not r.events]
    signal_table = refs[0].signal_table
    if not signal_table:
        raise ChangelakeError(
            f"connector {connector} has no signal.data.collection, so its tables cannot be"
            " snapshotted again while it streams"
        )
    _save(settings.run_dir, connector, entry)  # a run killed from here on starts it again
    api = ConnectApi(settings.connect_url)
    source = source_of_table(settings, refs[0])
    restarted = restart_capture(api, connector, source, api.connector_config(connector) or {})
    since = offsets_end(settings.kafka_bootstrap)
    signal = send(source.dsn(), signal_table, [Whole(r) for r in keyed]) if keyed else ""
    entry = entry | {
        "lsn": restarted.lsn,
        "xmax": restarted.xmax,
        "signal": signal,
        "since": {str(p): o for p, o in since.items()},
    }
    _save(settings.run_dir, connector, entry)
    out(
        f"re-sync of {connector}: capturing again from a new slot at {pg_lsn(restarted.lsn)};"
        f" sending {', '.join(r.name for r in keyed)} again (signal {signal})"
    )
    if lost := [r.name for r in refs if r.events]:
        out(
            run_log.warning(
                f"re-sync of {connector}: the events {', '.join(lost)} took while capture was"
                " lost cannot be read again from the source (it keeps no past events)"
            )
        )
    return entry


def asked(settings: Settings, refs: list[TableRef], entry: dict[str, Any]) -> Asked:
    """A begun re-sync's snapshot as a re-send to wait for (`resend.settle`)."""
    source = source_of_table(settings, refs[0])
    return Asked(
        refs[0].connector,
        source.dsn(),
        str(refs[0].signal_table),
        str(entry["signal"]),
        {int(p): int(o) for p, o in entry["since"].items()},
    )


class Resyncs:
    """The run's re-syncs, one thread per connector."""

    def __init__(
        self,
        settings: Settings,
        jobs: Mapping[str, TableJob],
        out: Out,
        forget: Callable[[str], None],
    ):
        """`forget(connector)`: drop the slot trouble last seen for it, once it is re-synced
        (a look taken during the re-sync must not start another)."""
        self.settings, self.jobs, self.out, self.forget = settings, jobs, out, forget
        self.phases: dict[str, str] = {}  # per connector re-syncing, where it stands
        self.causes: dict[str, Stall] = {}
        self.retry_at: dict[str, float] = {}
        self.begun = pending(settings.run_dir)  # a killed run's, and this run's, unfinished
        self._lock = threading.Lock()

    # --- asked by the run's loop ---------------------------------------------------------
    def want(self, stalls: Mapping[str, Stall]) -> None:
        """Start a re-sync for each connector whose slot lost changes (or that a killed run left
        half re-synced), unless one runs or the settings say a person decides."""
        if not self.settings.resync:
            return
        for connector, stall in stalls.items():
            if stall.cause in RESYNC_CAUSES and connector not in self.begun:
                self.out(
                    run_log.error(f"capture stalled: {stall.sentence}; re-syncing {connector}")
                )
                self.begun[connector] = {"cause": stall.sentence}
                self.causes[connector] = stall
        for connector, entry in list(self.begun.items()):
            with self._lock:
                busy = connector in self.phases
            if busy or time.monotonic() < self.retry_at.get(connector, 0.0):
                continue
            if not any(j.ref.connector == connector for j in self.jobs.values()):
                continue  # not this run's
            with self._lock:
                self.phases[connector] = "starting"
            threading.Thread(
                target=self._run,
                args=(connector, dict(entry)),
                daemon=True,
                name=f"changelake-resync-{connector}",
            ).start()

    def stalled(self) -> dict[str, Stall]:
        """Per connector re-syncing, a stall that says so (its tables are not current yet)."""
        with self._lock:
            phases = dict(self.phases)
        return {
            c: Stall(
                c,
                f"re-syncing {c} ({phase}) after: {self.causes[c].sentence}"
                if c in self.causes
                else f"re-syncing {c} ({phase})",
                "nothing to do: the run re-syncs it by itself and says when it is done",
                "resync",
            )
            for c, phase in phases.items()
        }

    # --- the re-sync's own thread --------------------------------------------------------
    def _say(self, connector: str, phase: str) -> None:
        with self._lock:
            self.phases[connector] = phase

    def _run(self, connector: str, entry: dict[str, Any]) -> None:
        try:
            self._resync(connector, entry)
        except Exception as exc:
            self.retry_at[connector] = time.monotonic() + RETRY_S
            self.out(
                run_log.error(
                    f"re-sync of {connector} failed ({first_line(exc)}); trying again in"
                    f" {RETRY_S:.0f}s"
                )
            )
        finally:
            with self._lock:
                self.phases.pop(connector, None)

    def _resync(self, connector: str, entry: dict[str, Any]) -> None:
        run_dir = self.settings.run_dir
        refs = [j.ref for j in self.jobs.values() if j.ref.connector == connector]
        keyed = [r for r in refs if not r.events]
        if entry.get("lsn") is None:
            self._say(connector, "starting capture from a new slot")
            entry = begin(self.settings, refs, entry, self.out)
        self._say(connector, "snapshot")
        settle(
            self.settings.kafka_bootstrap,
            [asked(self.settings, refs, entry)] if entry["signal"] else [],
            SNAPSHOT_TIMEOUT_S,
            lambda line: self.out(line.replace("repair:", "re-sync:")),
            _beat(self.settings, refs),
        )
        self._say(connector, "deleting the rows deleted during the gap")
        deleted = gap_deletes(self.settings, refs, entry, self.out)
        self._say(connector, "applying the snapshot and the deletes")
        ends = {r.name: kafka_io.watermarks(self.settings.kafka_bootstrap, r.topic) for r in keyed}

        def applied() -> bool:
            return all(self._applied(r, ends[r.name]) for r in keyed)

        if not wait_until(applied, APPLIED_TIMEOUT_S, interval_s=1.0):
            raise ChangelakeError(
                f"{connector}'s tables did not apply the re-sync's snapshot within"
                f" {APPLIED_TIMEOUT_S:.0f}s"
            )
        _save(run_dir, connector, None)
        self.begun.pop(connector, None)
        self.causes.pop(connector, None)
        self.forget(connector)
        self.out(
            f"re-sync of {connector} done: {', '.join(r.name for r in keyed)} sent again from"
            f" the source, {deleted:,} rows deleted during the gap deleted from the lake"
        )

    def _applied(self, ref: TableRef, ends: Mapping[int, tuple[int, int]]) -> bool:
        job = self.jobs.get(ref.name)
        applied = job.offsets if job is not None else {}
        return all(applied.get(str(p), 0) >= high for p, (_, high) in ends.items() if high)
