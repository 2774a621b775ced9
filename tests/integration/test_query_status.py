"""Soft deletes, and the read side: `changelake query` and `changelake status` as users run them."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable

import psycopg
import pytest

from tests.integration.pipeline_fixtures import Pipeline

pytestmark = pytest.mark.stack


def test_soft_deletes_then_query_and_status(pipeline: Callable[..., Pipeline], unique: str) -> None:
    t = f"soft_{unique}"
    p = pipeline(
        [t],
        [
            f"CREATE TABLE public.{t} (id int PRIMARY KEY, country text, amount numeric(8,2))",
            f"INSERT INTO public.{t} SELECT i, (ARRAY['DE','FR','JP'])[i % 3 + 1], i * 1.10"
            " FROM generate_series(1, 12) i",
        ],
        soft_delete=(t,),
    )
    p.run_once()
    p.sql(f"DELETE FROM public.{t} WHERE id IN (1, 2)")
    p.sql(f"UPDATE public.{t} SET amount = -0.10 WHERE id = 5")
    p.run_once()

    p.assert_equal(t, ["id"], soft=True)
    p.assert_equal_outside_spark(t, ["id"], soft=True)
    detail = p.spark.sql(f"DESCRIBE DETAIL delta.`{p.path(t)}`").first()
    assert detail is not None  # a base table keeps deletion vectors (merge-on-write)
    assert detail["properties"].get("delta.enableDeletionVectors") == "true"
    assert "deletionVectors" in detail["tableFeatures"]
    gone = p.spark.read.format("delta").load(p.path(t)).where("_cdc_deleted").collect()
    assert sorted(r["id"] for r in gone) == [1, 2]
    assert all(r["_cdc_deleted_at"] is not None and r["_cdc_op"] == "d" for r in gone)

    sql = (
        f"SELECT country, sum(amount) AS total, count(*) AS n FROM {t} "
        "WHERE NOT _cdc_deleted GROUP BY country ORDER BY country"
    )
    with psycopg.connect(p.dsn) as conn:
        want = conn.execute(
            f"SELECT country, sum(amount), count(*) FROM public.{t} GROUP BY 1 ORDER BY 1"
        ).fetchall()
    as_json = json.loads(p.cli("query", sql, "--json").stdout)
    assert [(r["country"], r["total"], r["n"]) for r in as_json] == [
        (c, str(total), n) for c, total, n in want
    ]
    as_csv = list(csv.reader(io.StringIO(p.cli("query", sql, "--csv").stdout)))
    assert as_csv[0] == ["country", "total", "n"]
    assert as_csv[1:] == [[c, str(total), str(n)] for c, total, n in want]
    table = p.cli("query", sql).stdout
    assert f"({len(want)} rows)" in table and str(want[0][1]) in table

    bad = p.cli("query", f"SELECT count( FROM {t}", check=False)
    assert bad.returncode != 0
    assert "PARSE_SYNTAX_ERROR" in bad.stderr and "at org.apache" not in bad.stderr
    write = p.cli("query", f"DELETE FROM {t}", check=False)
    assert write.returncode != 0 and "read-only" in write.stderr

    shown = p.cli("status", "--json", check=False)
    assert shown.returncode == 4, shown.stdout  # nothing wrong, and no pipeline running
    report = json.loads(shown.stdout)
    row = report["tables"][t]
    assert row["rows"] == 10 and row["soft_deleted"] == 2
    assert row["lag_records"] == 0 and row["errors"] == 0
    # `run --once` ends with nothing waiting in Kafka: the table lacks nothing
    assert (row["lag_changes"], row["lag_s"]) == (0, 0.0)
    # dead letters are queryable on a lake that has none
    errors = json.loads(p.cli("query", "SELECT count(*) AS n FROM _errors", "--json").stdout)
    assert errors == [{"n": 0}]
    with psycopg.connect(p.dsn) as conn:
        slot = conn.execute(
            "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = %s",
            (p.prefix,),
        ).fetchone()
    assert slot is not None
    assert row["applied_lsn"] > 0
    assert p.prefix in report["slots"]
