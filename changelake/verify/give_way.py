"""When continuous verification may take a step: between the run's compaction rounds.

A round folds every table's pending changes with several MERGEs at once, and under load rounds
follow each other back to back for minutes. A verification step beside them (a pass's copy of a
table above all) took 20-46 s of wall time on the bench's busy machine for 1-2 s of work, holding
one of Spark's task slots from the stream's batches all that while. So a step waits for room: no
round running, and none due within HEADROOM_S. A run that compacts back to back for longer than
MOST_S still gets a step then, so a pipeline under a load it cannot keep up with is verified too,
slowly.
"""

from __future__ import annotations

import time
from collections.abc import Callable

HEADROOM_S = 5.0  # a step needs this long with no round (a table's copy: 1-2 s when idle)
MOST_S = 300.0  # how long a step waits for room before it runs anyway
TICK_S = 0.5  # how often a waiting step looks again


class GiveWay:
    """`room()`: whether the pipeline's heavier work leaves room for a step now."""

    def __init__(
        self,
        room: Callable[[], bool],
        most_s: float = MOST_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.room, self.most_s, self.clock = room, most_s, clock
        self.since: float | None = None  # when the step now waiting began to wait

    def __call__(self) -> bool:
        """Whether the next step may start now: there is room, or it has waited long enough."""
        now = self.clock()
        if self.since is None:
            self.since = now
        if self._room() or now - self.since >= self.most_s:
            self.since = None
            return True
        return False

    def _room(self) -> bool:
        try:
            return self.room()
        # The compactor's state, read from this thread: should reading it fail, no room this
        # time rather than the end of verification for the run (MOST_S still bounds the wait).
        except Exception:
            return False
