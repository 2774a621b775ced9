"""The query side of serving through the running pipeline: which views a statement names, which
pipeline answers for which lake, and the port a second pipeline takes. (A real pipeline serving
real queries: tests/integration/test_added_table.py.)"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from changelake.bench.query_latency import QueryFigures, query_section
from changelake.lake.commits import CommitMeta
from changelake.read import served_query as served
from changelake.read.served_query import Served, mentioned, served_views
from changelake.serve.served import ServedViews, port_for, request_dir, requested
from changelake.settings import Settings, load_settings
from tests.support import wait_for

_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings({"CHANGELAKE_HOME": str(tmp_path)})


def test_a_statement_names_the_views_it_reads() -> None:
    views = ["orders", "order_lines", "customers", "_errors"]
    sql = "SELECT o.id, count(*) FROM Orders o JOIN order_lines l ON l.order_id = o.id GROUP BY 1"
    assert mentioned(views, sql) == ["orders", "order_lines"]
    assert mentioned(views, "SELECT * FROM _errors") == ["_errors"]
    assert mentioned(views, "SELECT customers_total FROM x") == []  # whole words only


def test_a_taken_port_gives_way_to_a_free_one() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = load_settings({"CHANGELAKE_SPARK_CONNECT_PORT": str(port)})
        other = port_for(settings)
    assert other != port and other > 0


def _serve(settings: Settings, pid: int, port: int, lake: str) -> None:
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    doc = {
        "pid": pid,
        "port": port,
        "token": "t0k",
        "lake": lake,
        "views": ["orders"],
        "fresh": 1.0,
    }
    (settings.run_dir / "served.json").write_text(json.dumps(doc))


def test_only_a_live_pipeline_of_the_same_lake_answers(settings: Settings) -> None:
    assert served_views(settings) is None  # nothing serves
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        _serve(settings, os.getpid(), port, settings.lake)
        assert served_views(settings) == Served(port, "t0k", ["orders"], 1.0)
        _serve(settings, os.getpid(), port, "/another/lake")
        assert served_views(settings) is None
        gone = subprocess.Popen(["true"])
        gone.wait()
        _serve(settings, gone.pid, port, settings.lake)
        assert served_views(settings) is None  # its pipeline is gone
    _serve(settings, os.getpid(), port, settings.lake)
    assert served_views(settings) is None  # nothing listens there any more


def test_the_report_says_how_long_queries_took() -> None:
    figures = QueryFigures(
        sql="SELECT * FROM t ORDER BY 1 LIMIT 1000",
        rows=1000,
        served_s=[1.2, 0.9, 1.0],
        served_p50=1.0,
        local_s=19.5,
    )
    (heading, text) = query_section(figures)
    assert heading == "## Query latency"
    assert "p50 **1.00 s** over 3 queries (1.20, 0.90, 1.00 s)" in text
    assert "of its own 19.5 s" in text
    assert query_section(None) == []


def _table(spark: SparkSession, path: str, ids: range) -> None:
    meta = CommitMeta("snapshot", "t", {"0": 1}, 1, None, ("id",))
    spark.conf.set(_USER_METADATA, meta.to_json())
    try:
        spark.range(ids.start, ids.stop).write.format("delta").mode("append").save(path)
    finally:
        spark.conf.unset(_USER_METADATA)


def test_views_follow_their_tables_also_when_made_again(
    spark: SparkSession, settings: Settings, tmp_path: Path
) -> None:
    """A new version shows; a deleted table loses its view; a table made again (a resnapshot)
    shows its new rows even at the version the old one had."""
    name, path = f"v_{uuid.uuid4().hex[:8]}", str(tmp_path / "t")
    views = ServedViews(spark, settings, list)

    def served() -> list[int] | None:
        views.refresh(name, path)
        if not spark.catalog.tableExists(f"global_temp.{name}"):
            return None
        return sorted(r[0] for r in spark.table(f"global_temp.{name}").collect())

    assert served() is None  # no table yet
    _table(spark, path, range(3))
    assert served() == [0, 1, 2]
    _table(spark, path, range(3, 4))
    assert served() == [0, 1, 2, 3]
    shutil.rmtree(path)
    assert served() is None
    _table(spark, path, range(10, 12))
    _table(spark, path, range(12, 13))  # version 1 again, as before the delete
    assert served() == [10, 11, 12]
    old_ms = (tmp_path / "t" / "_delta_log" / f"{1:020d}.json").stat().st_mtime_ns // 10**6
    shutil.rmtree(path)
    # The stamp is in milliseconds: the new table's commits come in a later one.
    wait_for(lambda: time.time_ns() // 10**6 > old_ms, 5, "the clock to pass the old commit")
    _table(spark, path, range(20, 21))
    _table(spark, path, range(21, 22))
    assert served() == [20, 21]  # same version as the view's, another table


def test_a_query_waits_for_views_up_to_date_with_its_request(settings: Settings) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        _serve(settings, os.getpid(), port, settings.lake)  # fresh as of 1970: behind
        began = time.monotonic()
        assert served.brought_up_to_date(settings, ["t"], timeout_s=0.3) is not None
        assert time.monotonic() - began >= 0.3  # waited, then took the views as they are

        requests = request_dir(settings)
        before = set(requests.glob("*.json"))
        assert [requested(r) for r in before] == [["t"]]  # what the first one asked for

        def pipeline_answers() -> None:  # as ServedViews does, once the request is there
            wait_for(lambda: set(requests.glob("*.json")) - before, 5, "the query's request")
            (request,) = set(requests.glob("*.json")) - before
            asked = request.stat().st_mtime
            doc = json.loads((settings.run_dir / "served.json").read_text())
            (settings.run_dir / "served.json").write_text(json.dumps({**doc, "fresh": asked}))

        answer = threading.Thread(target=pipeline_answers)
        answer.start()
        began = time.monotonic()
        assert served.brought_up_to_date(settings, ["t"], timeout_s=5) is not None
        answer.join()
        assert time.monotonic() - began < 2  # answered: not the whole timeout


def test_a_derived_view_follows_the_stored_histories_it_reads(
    spark: SparkSession, settings: Settings, tmp_path: Path
) -> None:
    """A view of views.json is served once its table's stored history exists, rebuilt when that
    gains a commit, and dropped when it is gone (a resnapshot starts it again)."""
    from changelake.lake.layout import history_of
    from changelake.sinks.history import HistorySink
    from changelake.views.config import ViewSpec
    from changelake.views.derived import DerivedView

    path = str(tmp_path / "shop" / "public" / "t")
    name, sink = f"h_{uuid.uuid4().hex[:8]}", HistorySink(spark, history_of(path))
    view = DerivedView(ViewSpec(name, "history", "t", "views.json"), (), (path,))
    views = ServedViews(spark, settings, list)

    def store(*changes: tuple[int, str, int]) -> None:
        schema = "id long, _cdc_op string, _cdc_lsn long, _cdc_source_ts timestamp, "
        schema += "_kafka_partition int, _kafka_offset long"
        sink.append(
            spark.createDataFrame([(k, op, at, None, 0, at) for k, op, at in changes], schema)
        )

    def served() -> list[tuple[int, bool]] | None:
        views.refresh_view(view)
        if not spark.catalog.tableExists(f"global_temp.{name}"):
            return None
        found = spark.table(f"global_temp.{name}").select("id", "_current").collect()
        return sorted((r[0], r[1]) for r in found)

    _table(spark, path, range(1))  # its commits record the key
    assert served() is None  # no history yet
    store((1, "c", 1), (2, "c", 2))
    assert served() == [(1, True), (2, True)]
    store((1, "u", 3))
    assert served() == [(1, False), (1, True), (2, True)]
    shutil.rmtree(history_of(path))
    assert served() is None


def test_a_request_at_the_endpoint_is_answered_once_its_tick_has_run(
    spark: SparkSession, settings: Settings
) -> None:
    """`ask` (the run's /served) waits for a tick that took its request, however recent the
    views' `fresh` time, and answers at once after it: not after the whole wait."""
    views = ServedViews(spark, settings, list)
    views.fresh = time.time() + 3600  # a request file's later time must not answer this one
    views.follow()
    try:
        began = time.monotonic()
        listing = views.ask(["_errors"], timeout_s=20)
        assert time.monotonic() - began < 10, "answered only by the timeout"
        assert "_errors" in views.stamps  # its tick brought the view asked for
        assert listing["views"] == views.servable and "token" not in listing
    finally:
        views.stop()
