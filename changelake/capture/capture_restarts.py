"""Keeping capture running: a Debezium task that failed is restarted, with backoff, and said so.

Debezium retries a lost connection while it streams, but not while its task starts: a Postgres
restart (or a container that restarts its server once initialised) during those seconds fails
the task with "Failed to create TypeRegistry … Connection reset", and Kafka Connect leaves it
FAILED "until manually restarted". Nothing then reaches Kafka and every derived table silently
stops moving. `changelake run` watches the connectors of the tables it derives and restarts a
failed task (Connect's `restart?onlyFailed=true`), waiting longer after each restart that did
not hold, so a configuration error is retried slowly and stays visible in the log. Each check
also records whether each connector captures at all (`stalls`, see capture_health): the run shows
its tables `stalled` meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from changelake import run_log
from changelake.capture.capture_health import Stall, stall_of
from changelake.capture.connect_api import ConnectApi, ConnectApiError, quote
from changelake.capture.failures import root_cause
from changelake.exceptions import RetryableError

CHECK_EVERY_S = 5.0
FIRST_BACKOFF_S, MOST_BACKOFF_S = 5.0, 300.0
HELD_S = 120.0  # a restart that kept the task running this long resets the backoff
Out = Callable[[str], None]


@dataclass
class _Restarts:
    count: int = 0
    last: float = 0.0


def failed_tasks(status: dict[str, object]) -> list[tuple[int, str]]:
    """(task id, its trace's root cause) for each FAILED task in a connector's status."""
    tasks = status.get("tasks")
    found = []
    for task in tasks if isinstance(tasks, list) else []:
        if task.get("state") == "FAILED":
            found.append((int(task.get("id", 0)), root_cause(str(task.get("trace") or ""))))
    return found


def restart_failed(api: ConnectApi, name: str) -> None:
    """Ask Connect to restart the connector's FAILED tasks (and only those)."""
    api.request("POST", f"/connectors/{quote(name)}/restart?includeTasks=true&onlyFailed=true")


class CaptureRestarts:
    def __init__(self, connect_url: str, out: Out, clock: Callable[[], float] = time.monotonic):
        self.api, self.out, self.clock = ConnectApi(connect_url, timeout_s=10.0), out, clock
        self.restarts: dict[str, _Restarts] = {}
        self.stalls: dict[str, Stall] = {}  # connector → why it captures nothing, as last seen
        self.next_check = 0.0

    def tick(self, connectors: Iterable[str]) -> None:
        now = self.clock()
        if now < self.next_check:
            return
        self.next_check = now + CHECK_EVERY_S
        for name in sorted(set(connectors)):
            try:
                self._check(name, now)
            except RetryableError:  # Connect itself away: the tables' own batches say so
                continue

    def _stalled(self, name: str, stall: Stall | None) -> None:
        if stall is None:
            self.stalls.pop(name, None)
        else:
            self.stalls[name] = stall

    def _check(self, name: str, now: float) -> None:
        try:
            status = self.api.get(f"/connectors/{quote(name)}/status")
        except ConnectApiError as exc:
            if exc.status == 404:  # not registered (yet): `connectors apply` does that
                self._stalled(name, stall_of(name, None))
                return
            raise
        self._stalled(name, stall_of(name, status))
        failed = failed_tasks(status)
        past = self.restarts.setdefault(name, _Restarts())
        if not failed:
            if past.count and now - past.last >= HELD_S:
                self.restarts[name] = _Restarts()
            return
        wait = min(MOST_BACKOFF_S, FIRST_BACKOFF_S * 2 ** max(0, past.count - 1))
        if past.count and now - past.last < wait:
            return
        past.count, past.last = past.count + 1, now
        restart_failed(self.api, name)
        for task, why in failed:
            self.out(
                run_log.warning(
                    f"connector {name}: task {task} FAILED ({why}); restarted it"
                    + (f" (restart {past.count}; the last did not hold)" if past.count > 1 else "")
                )
            )
