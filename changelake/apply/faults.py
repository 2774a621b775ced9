"""Named points where a test can freeze the pipeline to SIGKILL it at an awkward moment.

`CHANGELAKE_FAULT_PAUSE=<point>:<table>` makes the process, on reaching that point for that
table, write `<run dir>/paused-<point>-<table>` and wait there until it is killed. Unset (always,
outside the crash tests) it costs one dictionary lookup.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def pause_if(point: str, table: str, run_dir: Path) -> None:
    wanted = os.environ.get("CHANGELAKE_FAULT_PAUSE")
    if wanted != f"{point}:{table}":
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / f"paused-{point}-{table}").write_text(str(os.getpid()))
    while True:  # until the test's SIGKILL arrives
        time.sleep(1)
