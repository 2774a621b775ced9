"""Waiting on a condition with a deadline, and whether a process still runs: the one helper every
part uses instead of a loop of its own."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path


def wait_until(
    check: Callable[[], bool],
    timeout_s: float,
    *,
    interval_s: float = 0.5,
    alive: Callable[[], bool] = lambda: True,
) -> bool:
    """Poll `check` until it holds or the deadline passes; give up early if `alive` turns false."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        if not alive():
            return False
        time.sleep(interval_s)
    return check()


def alive(pid: int) -> bool:
    """True while any thread of `pid` runs. A process whose threads are all zombies is dead (its
    parent has not reaped it yet); but a JVM's main thread can be a zombie while its other
    threads still tear down, holding its ports open, so every thread counts."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    return any(_state(f"/proc/{pid}/task/{tid}/stat") not in ("Z", "X", None) for tid in threads)


def _state(stat_path: str) -> str | None:
    try:
        return Path(stat_path).read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
