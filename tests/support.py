"""Helpers the tests share: run the real CLI, wait on a condition with a deadline."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "pipelines.cli"]


def changelake(
    *args: str, check: bool = True, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real command line, as a user would."""
    result = subprocess.run(
        [*CLI, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env if env is not None else dict(os.environ),
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"changelake {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
        )
    return result


POLL_INTERVAL_S = 0.2  # how often a waiting test re-checks its condition


def wait_for(check: Callable[[], Any], timeout_s: float = 60.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(POLL_INTERVAL_S)


# A connector that acknowledges records one at a time (one per produce request, one request in
# flight) and polls them in hundreds: a few thousand records a second instead of tens of
# thousands, so a one-second offset flush lands inside a bulk transaction's COPY, and a graceful
# stop, which still sends and commits what was polled, overshoots by a few hundred at most.
SLOW_ACKS = {
    "producer.override.batch.size": "0",
    "producer.override.linger.ms": "0",
    "producer.override.max.in.flight.requests.per.connection": "1",
    "max.batch.size": "100",
    "max.queue.size": "200",
}
