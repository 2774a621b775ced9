"""The run's watch on capture: failed Debezium tasks restarted (capture_restarts), and each table
whose connector captures nothing shown `stalled`, said once when it starts and once when it
ends, so that a run never looks healthy while nothing reaches its tables."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from changelake import run_log
from changelake.capture.capture_restarts import CaptureRestarts
from changelake.tables import TableRef

Out = Callable[[str], None]


class CaptureWatch:
    def __init__(self, connect_url: str, out: Out, refs: Callable[[], Iterable[TableRef]]):
        self.restarts, self.out, self.refs = CaptureRestarts(connect_url, out), out, refs

    def tick(self) -> bool:
        """Look at the tables' connectors when due; True when one stopped or started capturing
        since the last look (the run's state file is then out of date)."""
        listed = list(self.refs())
        before = dict(self.restarts.stalls)
        self.restarts.tick(r.connector for r in listed)
        now = self.restarts.stalls
        changed = [c for c in sorted(set(before) | set(now)) if before.get(c) != now.get(c)]
        for name in changed:
            tables = ", ".join(sorted(r.name for r in listed if r.connector == name))
            if (stall := now.get(name)) is None:
                self.out(f"capture running again: connector {name} feeds {tables}")
            else:
                self.out(run_log.error(f"capture stalled: {stall}; tables {tables} STALLED"))
        return bool(changed)

    def stalled(self) -> Mapping[str, str]:
        """Per table whose connector captures nothing, why (as the last look saw it)."""
        stalls = dict(self.restarts.stalls)  # the metrics endpoint's thread reads this too
        return {r.name: stalls[r.connector].sentence for r in self.refs() if r.connector in stalls}
