"""Merge planning and schema reconciliation: pure logic, a local Spark session, no services."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from changelake.changelog.evolution import reconcile, widens
from changelake.changelog.exceptions import SchemaError
from changelake.changelog.plan import after_truncate, completed, latest_per_key
from changelake.spark import artifact_name

COLUMNS = (
    "id int, note string, n int, _cdc_op string, _cdc_lsn long, _toasted array<string>, "
    "_kafka_partition int, _kafka_offset long"
)


def plan(spark: SparkSession, rows: list[tuple[Any, ...]], toast: bool = False) -> dict[int, Any]:
    frame = spark.createDataFrame(rows, COLUMNS)
    out = latest_per_key(after_truncate(frame, None), ["id"], ["note"] if toast else ())
    return {r["id"]: (r["_cdc_op"], r["note"], r["n"], list(r["_toasted"])) for r in out.collect()}


def test_newest_change_per_key_wins_by_lsn_then_offset(spark: SparkSession) -> None:
    got = plan(
        spark,
        [
            (1, "a", 1, "c", 10, [], 0, 0),
            (1, "b", 2, "u", 30, [], 0, 2),
            (1, "stale", 3, "u", 20, [], 0, 5),  # later offset, older LSN (replayed)
            (2, "x", 1, "u", 40, [], 0, 3),
            (2, None, None, "d", 40, [], 0, 4),  # same LSN: the later offset wins
        ],
    )
    assert got == {1: ("u", "b", 2, []), 2: ("d", None, None, [])}


def test_placeholder_takes_the_newest_earlier_value_after_the_last_delete(
    spark: SparkSession,
) -> None:
    got = plan(
        spark,
        [
            (1, "big", 1, "c", 10, [], 0, 0),
            (1, None, 2, "u", 20, ["note"], 0, 1),  # placeholder: keeps "big"
            (2, "old", 1, "c", 10, [], 0, 2),
            (2, None, None, "d", 20, [], 0, 3),
            (2, "new", 1, "c", 30, [], 0, 4),
            (2, None, 5, "u", 40, ["note"], 0, 5),  # resolves to "new", not "old"
            (3, None, 7, "u", 50, ["note"], 0, 6),  # nothing earlier: the table's value stays
        ],
        toast=True,
    )
    assert got == {
        1: ("u", "big", 2, []),
        2: ("u", "new", 5, []),
        3: ("u", None, 7, ["note"]),
    }


def test_a_truncate_drops_every_change_before_it(spark: SparkSession) -> None:
    frame = spark.createDataFrame(
        [
            (1, "before", 1, "c", 10, [], 0, 0),
            (None, None, None, "t", 20, [], 0, 1),
            (2, "after", 1, "c", 30, [], 0, 2),
        ],
        COLUMNS,
    )
    kept = after_truncate(frame, 20).collect()
    assert [(r["id"], r["_cdc_op"]) for r in kept] == [(2, "c")]


def struct(**fields: T.DataType) -> T.StructType:
    return T.StructType([T.StructField(n, t) for n, t in fields.items()])


@pytest.mark.parametrize("soft", [False, True])
def test_open_placeholders_and_soft_deletes_are_completed_from_the_previous_row(
    spark: SparkSession, soft: bool
) -> None:
    newest = spark.createDataFrame(
        [
            (1, None, 5, "u", 30, ["note"], 0, 7),  # placeholder: the stored note stays
            (2, None, 6, "u", 31, ["note"], 0, 8),  # placeholder, no previous row: stays NULL
            (3, "new", 7, "u", 32, [], 0, 9),  # complete already
            (4, None, None, "d", 33, [], 0, 10),  # a soft delete keeps the deleted row's columns
        ],
        COLUMNS,
    )
    previous = spark.createDataFrame(
        [(1, "kept", 1, "c", 10), (3, "old", 1, "c", 11), (4, "gone", 2, "c", 12)],
        "id int, note string, n int, _cdc_op string, _cdc_lsn long",
    )
    out = completed(newest, previous, ["id"], soft)
    assert "_toasted" not in out.columns
    got = {r["id"]: (r["note"], r["n"], r["_cdc_lsn"]) for r in out.collect()}
    assert got == {
        1: ("kept", 5, 30),
        2: (None, 6, 31),
        3: ("new", 7, 32),
        4: ("gone", 2, 33) if soft else (None, None, 33),
    }


def test_reconcile_adds_columns_and_widens_types() -> None:
    stored = struct(id=T.IntegerType(), qty=T.IntegerType(), price=T.DecimalType(10, 2))
    incoming = struct(
        id=T.IntegerType(), qty=T.LongType(), price=T.DecimalType(12, 2), note=T.StringType()
    )
    evolution = reconcile("t", stored, incoming, ("id",), ("id",))
    assert [f.name for f in evolution.add] == ["note"]
    assert {f.name: f.dataType for f in evolution.widen} == {
        "qty": T.LongType(),
        "price": T.DecimalType(12, 2),
    }


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (T.DecimalType(10, 2), T.DecimalType(6, 2)),
        (T.DecimalType(10, 2), T.DecimalType(10, 3)),  # fewer integer digits
        (T.LongType(), T.IntegerType()),
        (T.IntegerType(), T.StringType()),
        (T.DoubleType(), T.FloatType()),
    ],
)
def test_a_narrowed_or_changed_type_names_table_and_column(
    old: T.DataType, new: T.DataType
) -> None:
    assert not widens(old, new)
    with pytest.raises(SchemaError, match=r"table orders, column total: type changed"):
        reconcile(
            "orders",
            struct(id=T.IntegerType(), total=old),
            struct(id=T.IntegerType(), total=new),
            ("id",),
            ("id",),
        )


def test_a_changed_primary_key_stops_the_table() -> None:
    cols = struct(id=T.IntegerType(), sku=T.StringType())
    with pytest.raises(SchemaError, match=r"primary key changed from \(id\) to \(id, sku\)"):
        reconcile("lines", cols, cols, ("id",), ("id", "sku"))


def test_decimal_values_survive_planning_exactly(spark: SparkSession) -> None:
    frame = spark.createDataFrame(
        [(1, Decimal("-99999999999999999999999999.999999999999"), "c", 1, [], 0, 0)],
        "id int, v decimal(38,12), _cdc_op string, _cdc_lsn long, _toasted array<string>, "
        "_kafka_partition int, _kafka_offset long",
    )
    (row,) = latest_per_key(frame, ["id"]).collect()
    assert row["v"] == Decimal("-99999999999999999999999999.999999999999")


@pytest.mark.parametrize(
    ("jar", "artifact"),
    [
        ("jackson-core-2.13.5.jar", "jackson-core"),
        ("zstd-jni-1.5.7-3.jar", "zstd-jni"),
        ("delta-spark_2.13-4.4.0.jar", "delta-spark_2.13"),
        ("log4j-slf4j2-impl-2.25.3.jar", "log4j-slf4j2-impl"),
    ],
)
def test_jar_artifact_names_ignore_versions(jar: str, artifact: str) -> None:
    assert artifact_name(jar) == artifact
