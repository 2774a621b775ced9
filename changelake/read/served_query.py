"""The query's side of serving through the running pipeline (serve/served.py is the run's): find
the pipeline that serves this lake, have the views a statement reads brought up to date, and
open a Spark Connect session on it.

A pipeline is found by its served.json (port, token, lake, pid). One this process cannot see
that way, such as the compose file's pipeline container from its host, is asked at its HTTP
endpoint (`/served` on the metrics port, published on this machine's loopback), and expects the
token both sides are given (`CHANGELAKE_SPARK_CONNECT_TOKEN`, from `.env`). Always on this
machine: Spark Connect carries the token in the clear, which PySpark sends only to `localhost`
without TLS (a pipeline elsewhere is reached through a tunnel to a local port).
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
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from changelake import jsonfile
from changelake.serve.served import FRESH_WAIT_S, SERVED_PATH, mtime, request_dir, served_file
from changelake.settings import Settings
from changelake.waiting import alive

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ASK_S = 0.5  # how long a pipeline's HTTP endpoint may take to say it is there
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Served:
    port: int
    token: str = field(repr=False)
    views: list[str]
    fresh: float  # the newest request its views are up to date for (a time.time)
    remote: bool = False  # found at its HTTP endpoint, not by served.json


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


def remote_views(settings: Settings, asked: list[str] | None = None) -> Served | None:
    """A pipeline's views from its HTTP endpoint (None: none answers there, or no token is set
    to connect with). `asked`: views to bring up to date first (the pipeline answers once they
    are, or after FRESH_WAIT_S with what it has)."""
    if not settings.metrics_port or not settings.spark_connect_token:
        return None
    url = f"http://127.0.0.1:{settings.metrics_port}{SERVED_PATH}"
    body = None if asked is None else json.dumps({"views": sorted(asked)}).encode()
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json"} if body else {}
    )
    wait_s = ASK_S if body is None else FRESH_WAIT_S + 5
    try:
        with urllib.request.urlopen(request, timeout=wait_s) as answer:
            doc = json.loads(answer.read())
        views = [str(v) for v in doc["views"]]
        port, fresh = int(doc["port"]), float(doc["fresh"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return Served(port, settings.spark_connect_token, views, fresh, remote=True)


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
    lake, when `sql` names one of `tables` it does not serve (a run of some tables only, or
    another project's run), or when this process has a local session already (the test
    suite's in-process commands)."""
    from pyspark.sql import SparkSession

    first = None
    if SparkSession.getActiveSession() is None:
        first = served_views(settings) or remote_views(settings)
    if first is None:
        return None
    show = sql.strip().lower().startswith("show")
    wanted = first.views if show else mentioned(first.views, sql)
    if first.remote:
        served = remote_views(settings, wanted) if wanted else first
    else:  # the Connect client's imports (~0.5 s) while the pipeline brings the views up
        served = brought_up_to_date(settings, wanted, meanwhile=_import_client)
    if served is None or set(mentioned(tables, sql)) - set(served.views):
        return None
    from pyspark.sql.connect.client.retries import DefaultPolicy

    # `localhost`, not 127.0.0.1: the one host PySpark sends a token to without TLS.
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
    settings: Settings,
    views: list[str],
    timeout_s: float = FRESH_WAIT_S,
    meanwhile: Callable[[], None] | None = None,
) -> Served | None:
    """Ask the pipeline to bring `views` up to date, and wait until it says it has (or, past
    `timeout_s`, take the views as they are: a busy pipeline answers with what it has). A
    statement that reads no view asks for nothing. `meanwhile`: work of the query's own, done
    once asked, before waiting."""
    if not views:
        return served_views(settings)
    request = request_dir(settings) / f"{os.getpid()}-{secrets.token_hex(4)}.json"
    jsonfile.write_atomically(request, {"views": sorted(views)})
    asked, deadline = mtime(request), time.monotonic() + timeout_s
    if meanwhile is not None:
        meanwhile()
    while True:
        served = served_views(settings)
        if served is None or served.fresh >= asked:
            return served
        if time.monotonic() > deadline:
            log.info("the running pipeline's views may trail its newest commits")
            return served
        time.sleep(0.02)


def _import_client() -> None:
    import pyspark.sql.connect.session  # noqa: F401  (most of a query's own CPU time)


def _release(spark: SparkSession) -> None:
    with contextlib.suppress(Exception):
        spark.stop()
