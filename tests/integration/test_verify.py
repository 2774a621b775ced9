"""`changelake verify` says equal when the lake and index equal the source, and finds a single
corrupted value, a missing row and an extra row in either, naming key and column."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import functions as F

from changelake.search.client import SearchClient
from changelake.settings import Settings
from changelake.verify.ranges import KeyColumn, KeyRange, lake_filter
from tests.integration.pipeline_fixtures import Pipeline

pytestmark = pytest.mark.stack

FIELDS = {"name": "text", "price": "numeric", "tags": "keyword", "seen": "date"}


def verify(p: Pipeline, t: str) -> tuple[int, dict[str, Any]]:
    result = p.cli("verify", "--tables", t, "--json", "--range-rows", "37", check=False)
    assert result.stdout.strip(), result.stderr
    report = json.loads(result.stdout)
    return result.returncode, report["tables"][0]


def test_verify_finds_one_changed_value_and_rows_missing_or_extra(
    pipeline: Callable[..., Pipeline], unique: str, settings: Settings
) -> None:
    t = f"verify_{unique}"
    p = pipeline(
        [t],
        [
            f"CREATE TABLE public.{t} (shop int, sku text, name text, price numeric(10,2),"
            " tags text[], doc jsonb, seen timestamptz, PRIMARY KEY (shop, sku))",
            f"INSERT INTO public.{t} SELECT i % 4, 'SKU-' || i || CASE WHEN i % 9 = 0 THEN 'é'"
            " ELSE '' END, 'name ' || i, i * 1.5, ARRAY['a', 'b' || i], jsonb_build_object('n', i),"
            " timestamptz '2026-01-01 00:00:00+00' + i * interval '1 minute'"
            " FROM generate_series(1, 300) i",
        ],
        search={t: FIELDS},
    )
    p.run_once()
    p.sql(f"UPDATE public.{t} SET price = price + 1 WHERE shop = 1")
    p.sql(f"DELETE FROM public.{t} WHERE shop = 2 AND sku LIKE 'SKU-1%'")
    p.run_once()

    code, report = verify(p, t)
    assert code == 0 and report["equal"], json.dumps(report, indent=1)
    assert report["delta"]["rows"] == report["index"]["rows"] > 250

    # One value in Delta, changed behind the pipeline's back; one row removed, one added.
    lake = p.path(t)
    p.spark.sql(f"UPDATE delta.`{lake}` SET price = price + 0.01 WHERE shop = 3 AND sku = 'SKU-7'")
    p.spark.sql(f"DELETE FROM delta.`{lake}` WHERE shop = 0 AND sku = 'SKU-8'")
    ghost = p.spark.read.format("delta").load(lake).limit(1)
    ghost = ghost.withColumn("shop", F.lit(9)).withColumn("sku", F.lit("ghost"))
    ghost.write.format("delta").mode("append").save(lake)
    # And one document in the index, overwritten at a newer version.
    client = SearchClient.of(settings)
    body = {"name": "tampered", "price": 1, "tags": [], "seen": None, "shop": 1, "sku": "SKU-5"}
    # Versions are LSNs: above any a server will reach (10 GB of WAL already passes 9,999,999,999).
    client.request(
        "PUT",
        f"/{p.alias(t)}/_doc/%5B%221%22,%22SKU-5%22%5D?version={2**62}"
        "&version_type=external&refresh=true",
        body,
    )

    code, report = verify(p, t)
    assert code == 3 and not report["equal"]
    delta = report["delta"]
    assert (delta["missing"], delta["extra"], delta["differing"]) == (1, 1, 1), delta
    assert "missing (0, SKU-8)" in delta["samples"]
    assert "extra (9, ghost)" in delta["samples"]
    assert any(s.startswith("differing (3, SKU-7): price: source") for s in delta["samples"])
    index = report["index"]
    assert (index["missing"], index["extra"], index["differing"]) == (0, 0, 1), index
    assert any(s.startswith("differing (1, SKU-5): name:") for s in index["samples"]), index


def test_a_lake_range_is_the_key_order_slice(spark: Any) -> None:
    """The range filter over the lake's rows selects exactly the keys in the range, ordered
    lexicographically over the key columns and text byte-wise, as Postgres orders them."""
    grid = [(a, b) for a in range(4) for b in ("a", "b", "é", "z")]
    frame = spark.createDataFrame(grid, "a int, b string")
    types = {f.name: f.dataType for f in frame.schema.fields}
    key = [KeyColumn("a", False), KeyColumn("b", True)]
    utf8 = lambda k: (k[0], k[1].encode())  # noqa: E731 - Spark orders strings by their bytes
    for lower, upper in [
        (None, (1, "b")),
        ((1, "b"), (2, "é")),
        ((2, "é"), None),
        ((0, "z"), (1, "a")),
    ]:
        got = frame.where(lake_filter(key, KeyRange(lower, upper), types)).collect()
        want = [
            k
            for k in grid
            if (lower is None or utf8(k) >= utf8(lower))
            and (upper is None or utf8(k) < utf8(upper))
        ]
        assert sorted(tuple(r) for r in got) == sorted(want), (lower, upper)
