"""Queries through the running pipeline: its warm Spark session serves the lake on Spark Connect
(the run's side; read/served_query.py is the query's).

A long `changelake run` starts Spark's own Connect server inside its driver (Spark's
SparkConnectPlugin, on loopback unless `CHANGELAKE_SPARK_CONNECT_BIND` says otherwise, so
notebooks and BI tools on this machine can use the same endpoint) and keeps one global temporary
view per table, `global_temp.<table>` (its base table, as every reader sees it, see
lake/table.py), brought to its table's newest version when a query asks for it. A query asks by
a file in the run directory (`served-requests/`), or, from where it cannot see that directory
(the host of the run's container), at the run's HTTP endpoint (`/served`, see apply/endpoint.py):
only the views its statement names, so a query never waits on a view it does not read.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from changelake import jsonfile
from changelake.settings import Settings
from changelake.views.config import project_views

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from changelake.tables import TableRef
    from changelake.views.derived import DerivedView

PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
TICK_S = 0.2  # how often the thread looks for a query's request
WARM_S = 60.0  # after a request, views follow every version this long (a burst of queries)
FRESH_WAIT_S = 5.0  # how long a query waits for the views to catch up with its request
SERVED_PATH = "/served"  # the run's HTTP endpoint: its views, and a query's request (POST)
PORT_RETRIES = 16  # Spark tries the next port when one is taken between our probe and its bind
# A table's version and commit time; a view of views.json: the version and time of each stored
# history it reads.
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
    where = settings.spark_connect_bind
    family = socket.AF_INET6 if ":" in where else socket.AF_INET
    for port in (settings.spark_connect_port, 0):
        with socket.socket(family) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC binds
            try:
                probe.bind((where, port))
            except OSError:
                continue
            return int(probe.getsockname()[1])
    raise OSError(f"no free port on {where}")


def server_conf(settings: Settings, port: int) -> dict[str, str]:
    """The Spark settings that make a session serve Spark Connect: on loopback (by default), and
    only to whoever has the token: the one configured, else a new one that only readers of
    served.json (mode 0600) learn."""
    return {
        "spark.plugins": PLUGIN,
        "spark.connect.grpc.binding.address": settings.spark_connect_bind,
        "spark.connect.grpc.binding.port": str(port),
        "spark.connect.grpc.port.maxRetries": str(PORT_RETRIES),
        "spark.connect.authenticate.token": (
            settings.spark_connect_token or secrets.token_urlsafe(32)
        ),
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
        self.fresh = 0.0  # the newest request the views have been brought up to date for
        self.wanted: dict[str, float] = {}  # each view asked for, and when it was last asked
        self.servable: list[str] = []  # every view a query may ask for
        self.specs = project_views(settings)  # as the run read them
        self._failing: set[str] = set()
        # Requests at the HTTP endpoint: (time asked, views; None: every view), answered as the
        # files are. Each is numbered: its asker waits until a tick that took it has ended (a
        # time would not do: a request file's later time could answer for a tick without it).
        self._asks: list[tuple[float, list[str] | None]] = []
        self._asked = self._answered_up_to = 0
        self._answered = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="served-views", daemon=True)

    def _loop(self) -> None:
        try:
            while not self._stop.wait(TICK_S):
                self._note_servable()
                requests = sorted(request_dir(self.settings).glob("*.json"))
                with self._answered:
                    asks, self._asks, taken = self._asks, [], self._asked
                now, asked = time.time(), 0.0
                for at, names in [(mtime(r), requested(r)) for r in requests] + asks:
                    asked = max(asked, at)
                    for name in self.servable if names is None else names:
                        self.wanted[name] = now
                self.wanted = {n: at for n, at in self.wanted.items() if now - at <= WARM_S}
                if not requests and not asks and not self.wanted:
                    continue  # nobody asked lately
                try:
                    self.tick(set(self.wanted))
                except Exception as exc:  # a bad tick (the lake unreachable): the next one
                    log.warning("query views not refreshed: %s", str(exc).splitlines()[0])
                    with self._answered:  # still asked: the next tick answers them
                        self._asks = asks + self._asks
                    continue
                if requests or asks:
                    with self._answered:
                        self.fresh = max(self.fresh, asked)
                        self._answered_up_to = taken
                        self._answered.notify_all()
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
        from changelake.lake.errors import ERRORS_VIEW, errors_path
        from changelake.views.derived import derived_views

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
        from changelake.lake.errors import ERRORS_VIEW
        from changelake.views.derived import derived_views

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
        """Rebuild `name`'s view if its table changed (`plain`: `_errors`, served empty before
        its first dead letter)."""
        from changelake.lake.delta_log import stamp
        from changelake.lake.table import read_table

        seen = self.stamps.get(name)
        known = seen or (-1, 0)
        try:
            now = stamp(self.spark, path, known[0])
            if now[0] < 0 and not plain:  # no table (yet, or again): no view
                self._drop(name)
                return
            if now == seen:
                return
            if plain:  # `_errors`: no rows in its columns while nothing failed
                from changelake.lake.errors import errors_rows

                rows = errors_rows(self.spark, self.settings)
            else:
                rows = read_table(self.spark, path, soft_delete).rows
            rows.createOrReplaceGlobalTempView(name)
        except Exception as exc:  # never the pipeline's problem: the next tick tries again
            self._failed(name, exc)
            return
        self._failing.discard(name)
        self.stamps[name] = now

    def refresh_view(self, view: DerivedView) -> None:
        """Rebuild a view of views.json if a stored history it reads (or its own rows) changed."""
        from changelake.lake.delta_log import stamp
        from changelake.views.derived import build_view

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
        self.follow()

    def follow(self) -> None:
        """Start answering requests (`start` does, once the Connect server is known)."""
        self._thread.start()

    def ask(self, views: list[str] | None, timeout_s: float = FRESH_WAIT_S) -> dict[str, object]:
        """Have `views` (None: every view) brought up to date, as a request file would, and wait
        until they are or `timeout_s` passed; then what a query needs to read them (the port and
        the views: the token it must know already)."""
        with self._answered:
            self._asked += 1
            number = self._asked
            self._asks.append((time.time(), views))
            self._answered.wait_for(lambda: self._answered_up_to >= number, timeout_s)
        return self.listing()

    def listing(self) -> dict[str, object]:
        """The port and the views, for the HTTP endpoint (never the token)."""
        return {"port": self.port, "views": self.servable, "fresh": self.fresh}

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


def mtime(path: Path) -> float:
    """A request file's time (0: gone already)."""
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
