"""Base tables kept quick to read beside the stream: each batch appends one file of new row
versions and marks the old rows in deletion vectors, so a table busy for an hour would hold
thousands of small files (every reader opens each, and past `spark.FILES_IN_CHECKSUM` a write
reads the table's file list by a Spark job instead of the checksum file).

Every CHECK_S the upkeep thread counts each streaming table's files under PACK_BYTES (from its
newest version's checksum, no job); a table with SMALL_FILES of them is packed by OPTIMIZE with
PACK_BYTES as its smallest file worth leaving alone: the small files become one, and Delta purges
the deletion vectors of files it rewrites (and of any file with over 5% of its rows marked),
while the large files of the snapshot stay. Its jobs run in the views' pool (half the stream's
weight). A batch committing meanwhile wins: OPTIMIZE fails and is tried at the next check; an
OPTIMIZE committing first makes the batch's write start again (sinks/delta.py), which costs that
batch one write more, never the stream.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from pyspark.sql import SparkSession

from changelake import run_log
from changelake.apply.streaming_failure import cause
from changelake.lake.layout import delta_exists, q
from changelake.sinks.delta_jvm import small_files
from changelake.tables import TableRef

Out = Callable[[str], None]
CHECK_S = 60.0  # how often the thread counts each table's small files
SMALL_FILES = 64  # a table with this many small files is packed
PACK_BYTES = 32 * 1024 * 1024  # a file smaller than this is small (a batch's: kilobytes)
POOL = "views"  # fairscheduler.xml: what the stream leaves over


class Upkeep:
    def __init__(
        self, spark: SparkSession, lake: str, tables: Callable[[], list[TableRef]], out: Out
    ):
        self.spark = spark.newSession()  # its OPTIMIZE settings reach no other write
        self.spark.conf.set("spark.databricks.delta.optimize.minFileSize", str(PACK_BYTES))
        self.lake, self.tables, self.out = lake, tables, out
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="changelake-upkeep", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self, wait_s: float) -> None:
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(wait_s)

    def _loop(self) -> None:
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", POOL)
        while not self.stopping.wait(CHECK_S):
            for ref in self.tables():
                if self.stopping.is_set():
                    return
                try:
                    self.pack_if_due(ref)
                except Exception as exc:  # a conflict, a table gone: the next check tries again
                    self.out(run_log.warning(f"{ref.name}: upkeep skipped: {cause(str(exc))}"))

    def pack_if_due(self, ref: TableRef) -> bool:
        """OPTIMIZE the table if it holds SMALL_FILES small files; whether it did."""
        path = ref.path(self.lake)
        if not delta_exists(self.spark, path):
            return False
        small = small_files(self.spark, path, PACK_BYTES)
        if small < SMALL_FILES:
            return False
        started = time.monotonic()
        self.spark.sql(f"OPTIMIZE delta.{q(path)}").collect()
        self.out(
            f"{ref.name}: packed {small:,} small files (OPTIMIZE) in "
            f"{time.monotonic() - started:.1f}s"
        )
        return True
