"""The load a chaos round runs while faults land: the demo workload on a thread of its own,
until the round's faults are over."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from pipelines.demo.load import LoadReport, run_load

FOREVER_S = 24 * 3600.0  # the round ends the load, not a duration


class Done(Protocol):
    @property
    def transactions(self) -> int: ...

    @property
    def row_changes(self) -> int: ...


class Workload(Protocol):
    def start(self) -> None: ...

    def stop(self) -> Done: ...


class BackgroundLoad:
    def __init__(self, dsn: str, rate: float, seed: int, say: Callable[[str], None]) -> None:
        self.dsn, self.rate, self.seed, self.say = dsn, rate, seed, say
        self.stopping = threading.Event()
        self.report: LoadReport | None = None
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="chaos-load", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        try:
            self.report = run_load(
                self.dsn,
                self.rate,
                FOREVER_S,
                seed=self.seed,
                progress=self._progress,
                stop=self.stopping.is_set,
            )
        except BaseException as exc:  # handed to the caller of stop()
            self.failure = exc

    def _progress(self, line: str) -> None:
        if "connection" in line or "reconnected" in line:  # not the per-second lines
            self.say(f"  {line}")

    def stop(self) -> LoadReport:
        self.stopping.set()
        self.thread.join()
        if self.failure is not None:
            raise self.failure
        assert self.report is not None
        return self.report
