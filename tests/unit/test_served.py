"""The query side of serving through the running pipeline: which views a statement names, which
pipeline answers for which lake, and the port a second pipeline takes. (A real pipeline serving
real queries: tests/integration/test_added_table.py.)"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from pipelines.bench.query_latency import QueryFigures, query_section
from pipelines.read.served import mentioned, port_for, served_views
from pipelines.settings import Settings, load_settings


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
    doc = {"pid": pid, "port": port, "lake": lake, "views": ["orders"]}
    (settings.run_dir / "served.json").write_text(json.dumps(doc))


def test_only_a_live_pipeline_of_the_same_lake_answers(settings: Settings) -> None:
    assert served_views(settings) is None  # nothing serves
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        _serve(settings, os.getpid(), port, settings.lake)
        assert served_views(settings) == (port, ["orders"])
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
