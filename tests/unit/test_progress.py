"""Progress of Spark work: the tasks of the jobs started inside the block, and only those."""

from __future__ import annotations

import itertools
import re
import socket
import threading

from pyspark.sql import SparkSession

from changelake import progress
from tests.support import wait_for


class Gate:
    """A loopback port Spark tasks wait at, on a blocking read, until `open()` closes their
    connections (or 60 s pass): a wait on the condition itself, in the worker processes."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = self.server.getsockname()
        self.waiting: list[socket.socket] = []
        self.opened = threading.Event()
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:  # closed
                return
            with self.lock:
                if self.opened.is_set():
                    conn.close()
                else:
                    self.waiting.append(conn)

    def open(self) -> None:
        with self.lock:
            self.opened.set()
            for conn in self.waiting:
                conn.close()

    def close(self) -> None:
        self.open()
        self.server.close()


def held_job(spark: SparkSession, tasks: int, gate: tuple[str, int]) -> None:
    """A job whose tasks finish only once the gate opens (or after 60 s): it runs for as long
    as the test needs to watch it, however fast the machine."""

    def hold(_: int) -> None:
        import contextlib
        import socket

        with socket.create_connection(gate, timeout=60) as conn, contextlib.suppress(TimeoutError):
            conn.recv(1)  # b"" once the gate closes the connection

    spark.sparkContext.parallelize(range(tasks), tasks).foreach(hold)


def test_counts_the_tasks_of_its_own_jobs_not_another_threads(
    spark: SparkSession,
) -> None:
    lines: list[str] = []
    gate = Gate()
    other = threading.Thread(target=held_job, args=(spark, 3, gate.address))

    def let_go() -> None:  # once a progress line has been written, the tasks may finish
        wait_for(lambda: lines, 60, "a progress line")
        gate.open()

    opener = threading.Thread(target=let_go)
    opener.start()
    with progress.spark_tasks(spark, "snapshot t", lines.append, every_s=0):
        other.start()  # a job of another thread at the same time: not this block's
        held_job(spark, 8, gate.address)
    other.join()
    opener.join()
    gate.close()
    counts = [tuple(map(int, re.findall(r"(\d+) of (\d+) tasks", line)[0])) for line in lines]
    assert counts, "no progress line"
    assert {total for _, total in counts} == {8}
    assert all(a <= b for (a, _), (b, _) in itertools.pairwise(counts))
    assert all(line.startswith("snapshot t: ") for line in lines)
    # The thread's job group is its own again afterwards.
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None
