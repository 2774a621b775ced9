"""Progress bars for long work (setup, seed, snapshot, verify), drawn by tqdm on standard error
while it is a terminal. Elsewhere (a log file, docker compose logs, the tests) no bar is drawn
and the callers' own lines, written every few seconds, say how far the work has come."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from changelake.spark import job_group

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

Out = Callable[[str], None]
POLL_S = 0.5
LINE_EVERY_S = 10.0  # without a terminal: a line this often


def bar(desc: str, total: float | None = None, unit: str = "it") -> tqdm[Any]:
    """A bar on standard error, or a disabled one (updates cost nothing) when it is no terminal."""
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        unit_scale=unit != "it",
        disable=not sys.stderr.isatty(),
        file=sys.stderr,
        leave=False,
    )


@contextmanager
def spark_tasks(
    spark: SparkSession, desc: str, out: Out, every_s: float = LINE_EVERY_S
) -> Iterator[None]:
    """Show the tasks done of the Spark jobs this thread starts inside the block (all their
    stages): a bar on a terminal, else a line every `every_s`. The jobs run in a job group
    of their own, so jobs other threads run at the same time (other tables' batches, the
    views' rounds) are not counted; the thread's previous group is restored afterwards."""
    sc = spark.sparkContext
    with job_group(sc, desc) as group:
        yield from _watched(sc, group, desc, out, every_s)


def _watched(sc: SparkContext, group: str, desc: str, out: Out, every_s: float) -> Iterator[None]:
    done = threading.Event()
    shown = bar(desc, unit="task")
    started = time.monotonic()

    def watch() -> None:
        said = started
        tracker = sc.statusTracker()
        while not done.wait(POLL_S):
            total = finished = 0
            for job_id in tracker.getJobIdsForGroup(group):
                job = tracker.getJobInfo(job_id)
                for stage_id in job.stageIds if job else ():
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None:
                        total += stage.numTasks
                        finished += stage.numCompletedTasks
            if total:
                shown.total, shown.n = total, finished
                shown.refresh()
            if shown.disable and total and time.monotonic() - said >= every_s:
                said = time.monotonic()
                out(f"{desc}: {finished} of {total} tasks done ({said - started:.0f} s)")

    watcher = threading.Thread(target=watch, name="progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        shown.close()
