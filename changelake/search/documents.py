"""Change rows → OpenSearch documents, in Spark: id from the key, version from the LSN.

Pure DataFrame-in, DataFrame-out. The document body is made by Spark's `to_json`, so decimals
keep Delta's exact digits and timestamps are ISO 8601 in UTC.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from changelake.changelog.decode import LSN, OFFSET, OP, PARTITION
from changelake.search.config import IndexSpec

ID, VERSION, DELETE, SOURCE = "id", "version", "delete", "source"
JSON_OPTIONS = {
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
    "ignoreNullFields": "false",
}


def doc_id(key: Sequence[str]) -> Column:
    """The primary key as a document id: the value itself for a one-column key, a JSON array of
    the values as strings for a composite one (stable, and no separator can be ambiguous)."""
    if len(key) == 1:
        return F.col(key[0]).cast("string")
    return F.to_json(F.array(*[F.col(k).cast("string") for k in key]))


def documents(rows: DataFrame, spec: IndexSpec, key: tuple[str, ...]) -> DataFrame:
    """One action per row: delete for `_cdc_op = 'd'`, otherwise index the declared columns.
    `_kafka_partition`/`_kafka_offset` are kept when present so a rejected document can be traced
    to its change event in `_errors`."""
    body = F.to_json(F.struct(*[F.col(c) for c in spec.columns(key)]), JSON_OPTIONS)
    deleted = F.col(OP) == "d"
    present = set(rows.columns)
    return rows.select(
        doc_id(key).alias(ID),
        F.col(LSN).alias(VERSION),
        deleted.alias(DELETE),
        F.when(~deleted, body).alias(SOURCE),
        (F.col(PARTITION) if PARTITION in present else F.lit(None).cast("int")).alias(PARTITION),
        (F.col(OFFSET) if OFFSET in present else F.lit(None).cast("long")).alias(OFFSET),
    )
