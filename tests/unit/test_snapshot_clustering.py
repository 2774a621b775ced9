"""A snapshot writes key-clustered files: each partition holds one range of the key, sorted, and
the rows are still the newest change per key with deletes dropped (local Spark session)."""

from __future__ import annotations

import itertools
import random

from pyspark.sql import SparkSession

from changelake.apply.snapshot import key_clustered
from changelake.changelog.decode import LSN, OFFSET, OP, PARTITION


def test_each_partition_holds_one_sorted_range_of_the_newest_rows(spark: SparkSession) -> None:
    rng = random.Random(7)
    changes = [(rng.randrange(2000), rng.choice("crud"), lsn) for lsn in range(5000)]
    frame = spark.createDataFrame(
        [(*c, 0, c[2]) for c in changes],
        f"id int, {OP} string, {LSN} long, {PARTITION} int, {OFFSET} long",
    )
    saved = spark.conf.get("spark.sql.adaptive.coalescePartitions.enabled")
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")  # several ranges
    try:
        parts = key_clustered(frame, ["id"]).rdd.map(lambda r: r["id"]).glom().collect()
    finally:
        spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", saved)
    ranges = [p for p in parts if p]
    assert len(ranges) >= 2
    assert all(p == sorted(p) for p in ranges)  # sorted within each file
    assert all(a[-1] < b[0] for a, b in itertools.pairwise(ranges))  # disjoint, in order
    newest: dict[int, tuple[str, int]] = {}
    for key, op, lsn in changes:
        newest[key] = (op, lsn)
    assert sorted(k for p in ranges for k in p) == sorted(
        k for k, (op, _) in newest.items() if op != "d"
    )
