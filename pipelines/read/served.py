"""Queries through the running pipeline: its warm Spark session serves the lake on Spark Connect.

A long `changelake run` starts Spark's own Connect server inside its driver (Spark's
SparkConnectPlugin, bound to loopback, so notebooks and BI tools on this machine can use the same
endpoint) and keeps one global temporary view per table, `global_temp.<table>` (base ⊕ changelog,
as every reader sees it, see read/table.py), rebuilt within a tick of the table gaining a version.
`changelake query` connects when `served.json` names a live pipeline of the same lake, gives those
views their bare names in its own Connect session and runs the statement there: no JVM to start,
no Delta log to rebuild. Without one it opens a local session, as before.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines import jsonfile
from pipelines.settings import Settings
from pipelines.stack.process import alive

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipelines.tables import TableRef

PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
TICK_S = 0.5  # how often the views look for new versions (a listing-free probe per table)
log = logging.getLogger(__name__)


def served_file(settings: Settings) -> Path:
    return settings.run_dir / "served.json"


def port_for(settings: Settings) -> int:
    """The configured port if it is free, else any free one: a second pipeline (another project)
    must not fail to start because the first one serves queries."""
    for port in (settings.spark_connect_port, 0):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(probe.getsockname()[1])
    raise OSError("no free port on 127.0.0.1")


class ServedViews:
    """The global temporary views of the tables `refs()` names, kept at their newest versions by
    a daemon thread; a table that cannot be read now keeps its last view and is tried again."""

    def __init__(self, spark: SparkSession, settings: Settings, refs: Callable[[], list[TableRef]]):
        self.spark, self.settings, self.refs = spark, settings, refs
        self.port = 0
        self.versions: dict[str, tuple[int, int]] = {}
        self._failing: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="served-views", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(TICK_S):
            try:
                refs = list(self.refs())
            except RuntimeError:  # the run added a table while we looked: next tick
                continue
            served = set(self.versions)
            for ref in refs:
                self.refresh(ref.name, ref.path(self.settings.lake), ref.soft_delete)
            self.refresh_errors()
            if set(self.versions) != served:
                self._write()

    def refresh(self, name: str, path: str, soft_delete: bool) -> bool:
        """Rebuild `name`'s view if its base table or changelog has a new version; whether it
        did."""
        from pipelines.read.table import read_table
        from pipelines.sinks.changelog import changelog_of
        from pipelines.sinks.delta_log import newest_version

        seen = self.versions.get(name, (-1, -1))
        try:
            now = (
                newest_version(self.spark, path, seen[0]),
                newest_version(self.spark, changelog_of(path), seen[1]),
            )
            if now == seen or now[0] < 0:  # unchanged, or no snapshot yet
                return False
            read_table(self.spark, path, soft_delete).rows.createOrReplaceGlobalTempView(name)
        except Exception as exc:  # never the pipeline's problem: the next tick tries again
            if name not in self._failing:
                log.warning("query view %s not refreshed: %s", name, str(exc).splitlines()[0])
            self._failing.add(name)
            return False
        self._failing.discard(name)
        self.versions[name] = now
        return True

    def refresh_errors(self) -> None:
        from pipelines.read.query import ERRORS_VIEW, errors_path
        from pipelines.sinks.delta_log import newest_version

        path = errors_path(self.settings)
        seen = self.versions.get(ERRORS_VIEW, (-1, -1))
        now = (newest_version(self.spark, path, seen[0]), -1)
        if now != seen and now[0] >= 0:
            self.spark.read.format("delta").load(path).createOrReplaceGlobalTempView(ERRORS_VIEW)
            self.versions[ERRORS_VIEW] = now

    def start(self, port: int) -> None:
        self.port = port
        self._write()
        self._thread.start()

    def _write(self) -> None:
        """served.json: where, which lake, and the views (so a query needs no catalog call)."""
        doc = {
            "pid": os.getpid(),
            "port": self.port,
            "lake": self.settings.lake,
            "views": sorted(self.versions),
        }
        jsonfile.write_atomically(served_file(self.settings), doc)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        with contextlib.suppress(OSError, ValueError):
            if json.loads(served_file(self.settings).read_text()).get("pid") == os.getpid():
                served_file(self.settings).unlink()


@contextmanager
def serving(
    spark: SparkSession, settings: Settings, refs: Callable[[], list[TableRef]]
) -> Iterator[ServedViews | None]:
    """Views served while the block runs, if this session runs the Connect server (a session
    someone else created, such as the test suite's, does not: then nothing is served)."""
    port = spark.conf.get("spark.connect.grpc.binding.port", None)
    if PLUGIN not in (spark.conf.get("spark.plugins", "") or "") or port is None:
        yield None
        return
    views = ServedViews(spark, settings, refs)
    views.start(int(port))
    try:
        yield views
    finally:
        views.stop()


# --- the query's side --------------------------------------------------------------------------


def served_views(settings: Settings) -> tuple[int, list[str]] | None:
    """The port and views of a live pipeline serving this lake, if one answers."""
    try:
        doc = json.loads(served_file(settings).read_text())
        pid, port, views = int(doc["pid"]), int(doc["port"]), [str(v) for v in doc["views"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if doc.get("lake") != settings.lake or not alive(pid):
        return None
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return None
    return port, views


def mentioned(views: list[str], sql: str) -> list[str]:
    """The views whose names occur in `sql` as words: a statement can read no other (naming
    each view costs a round trip to the server)."""
    words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sql)}
    return [v for v in views if v.lower() in words]


def connect(settings: Settings, sql: str) -> tuple[SparkSession, list[str]] | None:
    """A Connect session on the running pipeline, with the views `sql` names under their bare
    names, and every view's name; None
    when no pipeline serves this lake (or this process already has a local session, as the test
    suite's in-process commands do: Connect and classic sessions do not share a process well)."""
    from pyspark.sql import SparkSession

    served = served_views(settings)
    if served is None or SparkSession.getActiveSession() is not None:
        return None
    port, views = served
    spark = SparkSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()
    try:
        for name in mentioned(views, sql):
            spark.table(f"global_temp.{name}").createOrReplaceTempView(name)
    except Exception as exc:  # the pipeline stopped in between: a local session answers
        log.info("the running pipeline did not answer (%s); querying locally", exc)
        spark.stop()
        return None
    return spark, views
