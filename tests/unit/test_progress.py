"""Progress of Spark work: the tasks of the jobs started inside the block, and only those."""

from __future__ import annotations

import itertools
import re
import threading
import time

from pyspark.sql import SparkSession

from pipelines import progress


def slow_job(spark: SparkSession, tasks: int) -> None:
    spark.sparkContext.parallelize(range(tasks), tasks).foreach(lambda _: time.sleep(0.4))


def test_counts_the_tasks_of_its_own_jobs_not_another_threads(spark: SparkSession) -> None:
    lines: list[str] = []
    other = threading.Thread(target=slow_job, args=(spark, 3))
    with progress.spark_tasks(spark, "snapshot t", lines.append, every_s=0):
        other.start()  # a job of another thread at the same time: not this block's
        slow_job(spark, 8)
    other.join()
    counts = [tuple(map(int, re.findall(r"(\d+) of (\d+) tasks", line)[0])) for line in lines]
    assert counts, "no progress line"
    assert {total for _, total in counts} == {8}
    assert all(a <= b for (a, _), (b, _) in itertools.pairwise(counts))
    assert all(line.startswith("snapshot t: ") for line in lines)
    # The thread's job group is its own again afterwards.
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None
