"""Waiting on a condition with a deadline, as the bench does it: a line every 15 s saying what
for (and how far along, when it can tell), and a condition that may be given up on."""

from __future__ import annotations

import time
from collections.abc import Callable

SAY_EVERY_S = 15.0


def wait_saying(
    ready: Callable[[], bool],
    what: str,
    timeout_s: float,
    say: Callable[[str], None],
    required: bool = True,
    progress: Callable[[], str] | None = None,
) -> None:
    """Until `ready()`; after `timeout_s`, a TimeoutError when `required`, else a line saying
    the bench measures what is there."""
    deadline, next_say = time.monotonic() + timeout_s, time.monotonic() + SAY_EVERY_S
    while not ready():
        if time.monotonic() > deadline:
            if required:
                raise TimeoutError(f"bench: gave up waiting for {what} after {timeout_s:.0f} s")
            say(f"bench: {what}: not after {timeout_s:.0f} s; measuring what is there")
            return
        if time.monotonic() >= next_say:
            say(f"bench: waiting for {what}" + (f": {progress()}" if progress else ""))
            next_say = time.monotonic() + SAY_EVERY_S
        time.sleep(0.5)
