"""The `_errors` table of dead letters, at the lake's root: its columns, and its rows as readers
see them (an empty table in its columns while nothing failed)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from changelake.lake.layout import delta_exists

if TYPE_CHECKING:
    from changelake.settings import Settings

ERRORS_VIEW = "_errors"
# One dead letter per record and reason, compared NULL-safely: a document OpenSearch refused
# during a reindex has no Kafka partition or offset, and must not be added again by each rebuild.
ERROR_KEY = ("topic", "partition", "offset", "reason")
# The `_errors` table's columns (Kafka's own types for partition and offset).
ERRORS_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("value", T.StringType()),
        T.StructField("reason", T.StringType()),
        T.StructField("at", T.TimestampType()),
    ]
)


def errors_path(settings: Settings) -> str:
    return f"{settings.lake.rstrip('/')}/{ERRORS_VIEW}"


def errors_rows(spark: SparkSession, settings: Settings) -> DataFrame:
    """The dead letters: the `_errors` table, or no rows in its columns while nothing failed
    (so a query or dashboard that counts them works on any lake)."""
    path = errors_path(settings)
    if delta_exists(spark, path):
        return spark.read.format("delta").load(path)
    return spark.createDataFrame([], ERRORS_SCHEMA)
