"""The run's watch on capture: failed Debezium tasks restarted (capture_restarts), and each table
whose connector captures nothing (the connector is not running, or its replication slot cannot
give it what it missed: slot_trouble) shown `stalled`, said once when it starts and once when it
ends, so that a run never looks healthy while nothing reaches its tables. A streaming run
re-syncs a connector whose slot lost changes (`resync`); its tables show `stalled` meanwhile,
saying so."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from changelake import run_log
from changelake.apply.resync import Resyncs
from changelake.apply.run_state import TableJob
from changelake.capture.capture_health import Stall
from changelake.capture.capture_restarts import CaptureRestarts
from changelake.capture.slot_trouble import slot_troubles
from changelake.settings import Settings
from changelake.tables import TableRef

Out = Callable[[str], None]
SLOTS_EVERY_S = 15.0  # a look at each slot's source and Connect's stored offsets
STAYS = ("source_behind_lake", "source_replaced")  # said until the run ends


class CaptureWatch:
    def __init__(
        self,
        settings: Settings,
        out: Out,
        jobs: Mapping[str, TableJob],
        resyncs: Callable[[Callable[[str], None]], Resyncs] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        """`jobs`: the run's tables (more join as they are found), with the highest source LSN
        each applied: a source behind that was restored. `resyncs`: makes the run's re-syncs,
        given what forgets a connector's slot trouble (None: `run --once` re-syncs before)."""
        self.restarts, self.out, self.jobs = CaptureRestarts(settings.connect_url, out), out, jobs
        self.settings, self.clock = settings, clock
        self.slots: dict[str, Stall] = {}
        self.next_slots = 0.0
        self.resyncs = resyncs(self._forget) if resyncs is not None else None
        self.shown: dict[str, Stall] = {}  # the stalls the last look found

    def tick(self) -> bool:
        """Look at the tables' connectors when due; True when one stopped or started capturing
        since the last look (the run's state file is then out of date)."""
        listed = self._refs()
        before = self.shown  # as the last look left them: a re-sync may have ended since
        self.restarts.tick(r.connector for r in listed)
        if self.clock() >= self.next_slots:
            self.next_slots = self.clock() + SLOTS_EVERY_S
            applied = {j.ref.name: j.applied_lsn or None for j in list(self.jobs.values())}
            found = slot_troubles(self.settings, listed, applied)
            # A restore seen stays seen: the source writing past the lake's LSN again does not
            # give the lake back the changes it lost; only making the lake again does.
            kept = {c: s for c, s in self.slots.items() if s.cause in STAYS}
            self.slots = kept | found
        if self.resyncs is not None:
            self.resyncs.want(self.slots)
        now = self.shown = self._stalls()
        # By cause: a sentence naming a WAL position that moves is the same stall.
        changed = [
            c for c in sorted(set(before) | set(now)) if _cause(before.get(c)) != _cause(now.get(c))
        ]
        for name in changed:
            tables = ", ".join(sorted(r.name for r in listed if r.connector == name))
            if (stall := now.get(name)) is None:
                self.out(f"capture running again: connector {name} feeds {tables}")
            elif stall.cause != "resync":  # a re-sync says where it stands itself
                self.out(run_log.error(f"capture stalled: {stall}; tables {tables} STALLED"))
        return bool(changed)

    def _stalls(self) -> dict[str, Stall]:
        """Per connector that captures nothing, why: its slot's trouble first, the root cause of
        the failure Connect shows for it ("no longer available on the server")."""
        resyncing = self.resyncs.stalled() if self.resyncs is not None else {}
        return dict(self.restarts.stalls) | self.slots | resyncing

    def _forget(self, connector: str) -> None:
        """A connector re-synced: the slot trouble a look saw during the re-sync is gone, and
        the next look comes soon."""
        self.slots.pop(connector, None)
        self.next_slots = 0.0

    def stalled(self) -> Mapping[str, Stall]:
        """Per table whose connector captures nothing, why (as the last look saw it)."""
        stalls = self._stalls()  # the metrics endpoint's thread reads this too
        return {r.name: stalls[r.connector] for r in self._refs() if r.connector in stalls}

    def _refs(self) -> list[TableRef]:
        return [j.ref for j in list(self.jobs.values())]


def _cause(stall: Stall | None) -> tuple[str, str] | None:
    """What makes a stall another one. A re-sync's sentence says where it stands."""
    if stall is None:
        return None
    return (stall.cause, stall.sentence if stall.cause == "resync" else stall.next_step)
