"""Progress of Spark work: the tasks of the jobs started inside the block, and only those."""

from __future__ import annotations

import itertools
import re
import threading
import time
from pathlib import Path

from pyspark.sql import SparkSession

from pipelines import progress
from tests.support import wait_for


def held_job(spark: SparkSession, tasks: int, release: Path) -> None:
    """A job whose tasks finish only once `release` exists (or after 60 s): it runs for as long
    as the test needs to watch it, however fast the machine."""
    marker = str(release)

    def hold(_: int) -> None:
        import os

        deadline = time.monotonic() + 60
        while not os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.05)

    spark.sparkContext.parallelize(range(tasks), tasks).foreach(hold)


def test_counts_the_tasks_of_its_own_jobs_not_another_threads(
    spark: SparkSession, tmp_path: Path
) -> None:
    lines: list[str] = []
    release = tmp_path / "release"
    other = threading.Thread(target=held_job, args=(spark, 3, release))

    def let_go() -> None:  # once a progress line has been written, the tasks may finish
        wait_for(lambda: lines, 60, "a progress line")
        release.touch()

    opener = threading.Thread(target=let_go)
    opener.start()
    with progress.spark_tasks(spark, "snapshot t", lines.append, every_s=0):
        other.start()  # a job of another thread at the same time: not this block's
        held_job(spark, 8, release)
    other.join()
    opener.join()
    counts = [tuple(map(int, re.findall(r"(\d+) of (\d+) tasks", line)[0])) for line in lines]
    assert counts, "no progress line"
    assert {total for _, total in counts} == {8}
    assert all(a <= b for (a, _), (b, _) in itertools.pairwise(counts))
    assert all(line.startswith("snapshot t: ") for line in lines)
    # The thread's job group is its own again afterwards.
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None
