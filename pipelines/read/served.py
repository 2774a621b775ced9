"""Queries through the running pipeline: its warm Spark session serves the lake on Spark Connect.

A long `changelake run` starts Spark's own Connect server inside its driver (Spark's
SparkConnectPlugin, bound to loopback, so notebooks and BI tools on this machine can use the same
endpoint) and keeps one global temporary view per table, `global_temp.<table>` (base ⊕ changelog,
as every reader sees it, see read/table.py), rebuilt within a tick of the table gaining a version.
`changelake query` connects when `served.json` names a live pipeline of the same lake, asks for
the views its statement names to be brought up to date (and only those: a query never waits on a
view it does not read), gives them their bare names in its own Connect session and runs the
statement there: no JVM to start, no Delta log to rebuild. Without one it opens a local session.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines import jsonfile
from pipelines.settings import Settings
from pipelines.spark import release
from pipelines.stack.process import alive
from pipelines.views.config import load_views, views_config_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.read.views import DerivedView
    from pipelines.tables import TableRef

PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
TICK_S = 0.2  # how often the thread looks for a query's request
WARM_S = 60.0  # after a request, views follow every version this long (a burst of queries)
FRESH_WAIT_S = 5.0  # how long a query waits for the views to catch up with its request
PORT_RETRIES = 16  # Spark tries the next port when one is taken between our probe and its bind
# Base version and commit time, changelog version and time; a view of views.json: the version
# and time of each stored history it reads.
Stamp = tuple[int, ...]
log = logging.getLogger(__name__)


def served_file(settings: Settings) -> Path:
    return settings.run_dir / "served.json"


def request_dir(settings: Settings) -> Path:
    """Each query writes a file there naming the views it reads; they are brought up to date
    for it (see ServedViews). A file each, so queries at once never overwrite each other."""
    return settings.run_dir / "served-requests"


def requested(path: Path) -> list[str] | None:
    """The views a request names (None: unreadable, so every view)."""
    try:
        names = json.loads(path.read_text())["views"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return [str(n) for n in names] if isinstance(names, list) else None


def port_for(settings: Settings) -> int:
    """The configured port if it is free, else any free one: a second pipeline (another project)
    must not fail to start because the first one serves queries."""
    for port in (settings.spark_connect_port, 0):
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC binds
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(probe.getsockname()[1])
    raise OSError("no free port on 127.0.0.1")


def server_conf(port: int) -> dict[str, str]:
    """The Spark settings that make a session serve Spark Connect: on loopback, and only to
    whoever can read served.json (mode 0600), which holds the token."""
    return {
        "spark.plugins": PLUGIN,
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.connect.grpc.port.maxRetries": str(PORT_RETRIES),
        "spark.connect.authenticate.token": secrets.token_urlsafe(32),
    }


class ServedViews:
    """The global temporary views of the tables `refs()` names, brought to their newest versions
    by a daemon thread when a query asks for them (it writes their names to a file of its own
    in `served-requests/`; `fresh` in served.json answers with the request's time), and for
    WARM_S after it: only the views asked for, so a query on one table costs one table's
    refresh, however many the run applies. Nobody querying costs the pipeline a file check per
    tick, not a view rebuild per batch. A table that cannot be read now keeps its last view and
    is tried again; one whose base table is gone (a resnapshot) loses its view until it is
    back."""

    def __init__(self, spark: SparkSession, settings: Settings, refs: Callable[[], list[TableRef]]):
        self.spark, self.settings, self.refs = spark, settings, refs
        self.port, self.token = 0, ""
        self.stamps: dict[str, Stamp] = {}
        # Each view's changelog side (newest change per key), computed once per version, so
        # a query scans the base table and joins a checkpointed frame (`spark.kept`) instead
        # of reading and shuffling the changelog again.
        self.cached: dict[str, DataFrame] = {}
        self.retired: list[tuple[float, DataFrame]] = []  # replaced, released after WARM_S
        self.fresh = 0.0  # the newest request the views have been brought up to date for
        self.wanted: dict[str, float] = {}  # each view asked for, and when it was last asked
        self.servable: list[str] = []  # every view a query may ask for
        self.specs = load_views(views_config_path(settings))  # as the run read them
        self._failing: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="served-views", daemon=True)

    def _loop(self) -> None:
        try:
            while not self._stop.wait(TICK_S):
                self._note_servable()
                requests = sorted(request_dir(self.settings).glob("*.json"))
                now, asked = time.time(), 0.0
                for request in requests:
                    asked = max(asked, _mtime(request))
                    names = requested(request)
                    for name in self.servable if names is None else names:
                        self.wanted[name] = now
                self.wanted = {n: at for n, at in self.wanted.items() if now - at <= WARM_S}
                if not requests and not self.wanted:
                    continue  # nobody asked lately
                try:
                    self.tick(set(self.wanted))
                except Exception as exc:  # a bad tick (the lake unreachable): the next one
                    log.warning("query views not refreshed: %s", str(exc).splitlines()[0])
                    continue
                if requests:
                    self.fresh = max(self.fresh, asked)
                    self._publish()
                    for request in requests:
                        request.unlink(missing_ok=True)
        finally:  # views that no longer follow the tables must not be advertised
            self._unpublish()

    def tick(self, wanted: set[str] | None = None) -> None:
        """Bring the views `wanted` names (None: all) up to their tables' newest versions."""
        try:
            refs = list(self.refs())
        except RuntimeError:  # the run added a table while we looked: next tick
            return
        from pipelines.read.query import ERRORS_VIEW, errors_path
        from pipelines.read.views import derived_views

        served = set(self.stamps)
        views = derived_views(self.settings, refs, self.specs)
        for ref in refs:
            if wanted is None or ref.name in wanted:
                self.refresh(ref.name, ref.path(self.settings.lake), ref.soft_delete)
        for view in views:
            if wanted is None or view.name in wanted:
                self.refresh_view(view)
        if wanted is None or ERRORS_VIEW in wanted:
            self.refresh(ERRORS_VIEW, errors_path(self.settings), plain=True)
        if set(self.stamps) != served:
            self._publish()

    def _note_servable(self) -> None:
        """Every view a query may ask for (the run's tables, views.json's views, `_errors`),
        published when it changes: the names a query looks for in its statement."""
        from pipelines.read.query import ERRORS_VIEW
        from pipelines.read.views import derived_views

        try:
            refs = list(self.refs())
        except RuntimeError:  # the run added a table while we looked: next tick
            return
        views = derived_views(self.settings, refs, self.specs)
        servable = sorted([*(r.name for r in refs), *(v.name for v in views), ERRORS_VIEW])
        if servable != self.servable:
            self.servable = servable
            self._publish()

    def refresh(
        self,
        name: str,
        path: str,
        soft_delete: bool = False,
        plain: bool = False,
    ) -> None:
        """Rebuild `name`'s view if its base table or changelog changed (`plain`: `_errors`, a
        Delta table without a changelog, served empty before its first dead letter)."""
        from pipelines.read.table import read_table
        from pipelines.sinks.changelog import changelog_of
        from pipelines.sinks.delta_log import stamp

        seen = self.stamps.get(name)
        known = seen or (-1, 0, -1, 0)
        try:
            log_stamp = (-1, 0) if plain else stamp(self.spark, changelog_of(path), known[2])
            now = (*stamp(self.spark, path, known[0]), *log_stamp)
            if now[0] < 0 and not plain:  # no table (yet, or again): no view
                self._drop(name)
                return
            if now == seen:
                return
            pending = None
            if plain:  # `_errors`: no rows in its columns while nothing failed
                from pipelines.read.query import errors_rows

                rows = errors_rows(self.spark, self.settings)
            else:
                read = read_table(self.spark, path, soft_delete, cache=True)
                rows, pending = read.rows, read.pending
            rows.createOrReplaceGlobalTempView(name)
            self._retire(self.cached.pop(name, None))
            if pending is not None:
                self.cached[name] = pending
        except Exception as exc:  # never the pipeline's problem: the next tick tries again
            self._failed(name, exc)
            return
        self._failing.discard(name)
        self.stamps[name] = now

    def refresh_view(self, view: DerivedView) -> None:
        """Rebuild a view of views.json if a stored history it reads (or its own rows) changed."""
        from pipelines.read.views import build_view
        from pipelines.sinks.delta_log import stamp

        seen = self.stamps.get(view.name, ())
        try:
            now: Stamp = ()
            for i, path in enumerate(view.watched):
                now += stamp(self.spark, path, seen[2 * i] if seen else -1)
            if min(now[::2]) < 0:  # a history or its rows not started (yet, or again): no view
                self._drop(view.name)
                return
            if now == seen:
                return
            rows = build_view(self.spark, view)
            if rows is None:  # a table records no key (yet)
                return
            rows.createOrReplaceGlobalTempView(view.name)
        except Exception as exc:
            self._failed(view.name, exc)
            return
        self._failing.discard(view.name)
        self.stamps[view.name] = now

    def _failed(self, name: str, exc: Exception) -> None:
        if name not in self._failing:
            log.warning("query view %s not refreshed: %s", name, str(exc).splitlines()[0])
        self._failing.add(name)

    def _drop(self, name: str) -> None:
        if self.stamps.pop(name, None) is not None:
            self.spark.catalog.dropGlobalTempView(name)
        self._retire(self.cached.pop(name, None))

    def _retire(self, old: DataFrame | None) -> None:
        """Release a replaced view's kept frame once queries that planned with it have had
        WARM_S to finish (released under a running query, it would fail)."""
        now = time.monotonic()
        if old is not None:
            self.retired.append((now, old))
        while self.retired and now - self.retired[0][0] > WARM_S:
            release(self.retired.pop(0)[1])

    def start(self) -> None:
        """Serve the session's Connect server (the port it bound, the token it expects)."""
        jvm = self.spark._jvm
        assert jvm is not None
        service = getattr(jvm.org.apache.spark.sql.connect.service, "SparkConnectService$")
        self.port = int(getattr(service, "MODULE$").localPort())  # a Scala object's one instance
        self.token = self.spark.conf.get("spark.connect.authenticate.token") or ""
        request_dir(self.settings).mkdir(parents=True, exist_ok=True)
        self._note_servable()
        self._publish()
        self._thread.start()

    def _publish(self) -> None:
        """served.json: where, the token, which lake, and the views (no catalog call needed)."""
        doc = {
            "pid": os.getpid(),
            "port": self.port,
            "token": self.token,
            "lake": self.settings.lake,
            "views": self.servable,
            "fresh": self.fresh,
        }
        jsonfile.write_atomically(served_file(self.settings), doc, mode=0o600)

    def _unpublish(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            if json.loads(served_file(self.settings).read_text()).get("pid") == os.getpid():
                served_file(self.settings).unlink()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        self._unpublish()


@contextmanager
def serving(
    spark: SparkSession, settings: Settings, refs: Callable[[], list[TableRef]]
) -> Iterator[ServedViews | None]:
    """Views served while the block runs, if this session runs the Connect server (a session
    someone else created, such as the test suite's, does not: then nothing is served)."""
    if PLUGIN not in (spark.conf.get("spark.plugins", "") or ""):
        yield None
        return
    views = ServedViews(spark, settings, refs)
    try:
        views.start()
    except Exception as exc:  # queries go without the pipeline; the pipeline never without them
        log.warning("not serving queries: %s", str(exc).splitlines()[0])
        yield None
        return
    try:
        yield views
    finally:
        views.stop()


# --- the query's side --------------------------------------------------------------------------


@dataclass(frozen=True)
class Served:
    port: int
    token: str
    views: list[str]
    fresh: float  # the newest request its views are up to date for (a file time)


def served_views(settings: Settings) -> Served | None:
    """Where a live pipeline serving this lake answers, and its views, if one does."""
    try:
        doc = json.loads(served_file(settings).read_text())
        pid = int(doc["pid"])
        views = [str(v) for v in doc["views"]]
        served = Served(int(doc["port"]), str(doc["token"]), views, float(doc["fresh"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if doc.get("lake") != settings.lake or not alive(pid):
        return None
    try:
        socket.create_connection(("127.0.0.1", served.port), timeout=0.5).close()
    except OSError:
        return None
    return served


def words(sql: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sql)}


def mentioned(views: list[str], sql: str) -> list[str]:
    """The views whose names occur in `sql` as words: a statement can read no other (naming
    each view costs a round trip to the server)."""
    named = words(sql)
    return [v for v in views if v.lower() in named]


def connect(
    settings: Settings, sql: str, tables: list[str]
) -> tuple[SparkSession, list[str]] | None:
    """A Connect session on the running pipeline, with the views `sql` names under their bare
    names, and every view's name; None (a local session answers) when no pipeline serves this
    lake, when `sql` names one of `tables` it does not serve (a run of some tables only), or
    when this process has a local session already (the test suite's in-process commands)."""
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import DefaultPolicy

    first = served_views(settings) if SparkSession.getActiveSession() is None else None
    if first is None:
        return None
    show = sql.strip().lower().startswith("show")
    served = brought_up_to_date(settings, first.views if show else mentioned(first.views, sql))
    if served is None or set(mentioned(tables, sql)) - set(served.views):
        return None
    url = f"sc://localhost:{served.port}/;token={served.token}"
    spark = SparkSession.builder.remote(url).getOrCreate()
    # Seconds, not pyspark's ten minutes of retries, before a gone pipeline means a local query.
    spark.client.set_retry_policies([DefaultPolicy(max_retries=3, max_backoff=1000)])
    try:
        for name in mentioned(served.views, sql):
            spark.table(f"global_temp.{name}").createOrReplaceTempView(name)
        for name in served.views if show else ():  # those that exist (yet)
            with contextlib.suppress(Exception):
                spark.table(f"global_temp.{name}").createOrReplaceTempView(name)
    except Exception as exc:  # the pipeline stopped in between: a local session answers
        log.info("the running pipeline did not answer (%s); querying locally", exc)
        with contextlib.suppress(Exception):
            spark.stop()
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)  # set by remote(); classic refuses it
        return None
    atexit.register(_release, spark)  # the server keeps a session until told (or an hour)
    return spark, served.views


def brought_up_to_date(
    settings: Settings, views: list[str], timeout_s: float = FRESH_WAIT_S
) -> Served | None:
    """Ask the pipeline to bring `views` up to date, and wait until it says it has (or, past
    `timeout_s`, take the views as they are: a busy pipeline answers with what it has). A
    statement that reads no view asks for nothing."""
    if not views:
        return served_views(settings)
    request = request_dir(settings) / f"{os.getpid()}-{secrets.token_hex(4)}.json"
    jsonfile.write_atomically(request, {"views": sorted(views)})
    asked, deadline = _mtime(request), time.monotonic() + timeout_s
    while True:
        served = served_views(settings)
        if served is None or served.fresh >= asked:
            return served
        if time.monotonic() > deadline:
            log.info("the running pipeline's views may trail its newest commits")
            return served
        time.sleep(0.02)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _release(spark: SparkSession) -> None:
    with contextlib.suppress(Exception):
        spark.stop()
