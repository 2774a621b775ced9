"""Kafka records of one table's topic → typed change rows, and dead letters for the rest.

Every event carries its own schema (JsonConverter with schemas on). A batch is decoded per schema
version: the few distinct (value schema, key schema) pairs are collected, each is turned into a
Spark schema, and the payloads of that version are read with `from_json` in one pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.changelog.schema import CORRUPT, RowVersion, row_version
from pipelines.changelog.types import is_placeholder

DEFAULT_PLACEHOLDER = "__debezium_unavailable_value"
OPS = ("c", "u", "d", "r", "t")
# The first pass copies only the schema out as text; the payload is parsed once, typed, straight
# from the record (Spark re-prints numbers it copies as text through a double, which would round
# a numeric(38,10)).
_ENVELOPE = T.StructType(
    [
        T.StructField("schema", T.StringType()),
        T.StructField("payload", T.StructType([T.StructField("op", T.StringType())])),
    ]
)
_KEY_ENVELOPE = T.StructType([T.StructField("schema", T.StringType())])
# Columns every change row carries besides the table's own.
LSN, OP, SOURCE_TS = "_cdc_lsn", "_cdc_op", "_cdc_source_ts"
PARTITION, OFFSET, TOASTED = "_kafka_partition", "_kafka_offset", "_toasted"
REASON = "_reason"
ERROR_COLUMNS = ("topic", "partition", "offset", "value", "reason", "at")


def envelopes(raw: DataFrame) -> DataFrame:
    """Take each record's schema text and whether it has a payload. Tombstones (null values)
    stay, with a null `value_text`, so the batch's offsets are all known; decoding skips them:
    they only tell compaction to forget a deleted key, whose delete event came just before."""
    value = F.col("value").cast("string")
    parsed = F.from_json(value, _ENVELOPE)
    key = F.from_json(F.col("key").cast("string"), _KEY_ENVELOPE)
    return raw.select(
        "topic",
        "partition",
        "offset",
        value.alias("value_text"),
        parsed["schema"].alias("value_schema"),
        parsed["payload"].alias("payload"),
        key["schema"].alias("key_schema"),
    )


def _error_rows(frame: DataFrame, reason: Column) -> DataFrame:
    return frame.select(
        "topic",
        "partition",
        "offset",
        F.col("value_text").alias("value"),
        reason.alias("reason"),
        F.current_timestamp().alias("at"),
    )


def malformed(env: DataFrame) -> DataFrame:
    """Records that are not a Debezium JSON envelope with a schema, as dead letters."""
    bad = env.where(
        F.col("value_text").isNotNull()
        & (F.col("payload").isNull() | F.col("value_schema").isNull())
    )
    reason = (
        F.when(F.get_json_object("value_text", "$").isNull(), F.lit("not JSON"))
        .when(F.col("payload").isNull(), F.lit("no payload: not a Debezium change event"))
        .otherwise(F.lit("no schema in the event (value.converter.schemas.enable must be true)"))
    )
    return _error_rows(bad, reason)


@dataclass(frozen=True)
class Version:
    value_schema: str
    key_schema: str | None
    row: RowVersion


def versions(env: DataFrame) -> list[Version]:
    """The distinct schema versions in a batch (usually one; two around a DDL change)."""
    pairs = (
        env.where(F.col("payload").isNotNull() & F.col("value_schema").isNotNull())
        .select("value_schema", "key_schema")
        .distinct()
        .collect()
    )
    return [Version(p[0], p[1], row_version(p[0], p[1])) for p in pairs]


def _of_version(env: DataFrame, version: Version) -> DataFrame:
    return env.where(
        F.col("payload").isNotNull()
        & (F.col("value_schema") == version.value_schema)
        & F.col("key_schema").eqNullSafe(F.lit(version.key_schema))
    )


def decode(env: DataFrame, version: Version, placeholder: str) -> DataFrame:
    """Typed change rows for the records of one schema version, each with the REASON it cannot
    be applied (NULL for a good one): see `split`."""
    row = version.row
    record = T.StructType(
        [T.StructField("payload", row.payload_struct()), T.StructField(CORRUPT, T.StringType())]
    )
    # from_json puts the whole record in CORRUPT when any field fails to parse (a value that
    # overflows its decimal, text in a number) instead of quietly making that field NULL.
    parsed = F.from_json("value_text", record, {"columnNameOfCorruptRecord": CORRUPT})
    typed = _of_version(env, version).select(
        "*", parsed["payload"].alias("p"), parsed[CORRUPT].alias(CORRUPT)
    )
    op = F.col("p.op")
    image = F.when(op == "d", F.col("p.before")).otherwise(F.col("p.after"))
    reason = (
        F.when(
            F.col("p").isNull() | op.isNull() | F.col(CORRUPT).isNotNull(),
            F.lit("value does not match its schema"),
        )
        .when(~op.isin(*OPS), F.concat(F.lit("unknown operation: "), op))
        .when(op.isin("c", "u", "r") & F.col("p.after").isNull(), F.lit("no row image (after)"))
    )
    if not row.truncate:
        missing = [k for k in row.key if k not in row.names]
        if not row.key:
            reason = reason.when(F.lit(True), F.lit("the key has no schema: not a Debezium key"))
        elif missing:
            reason = reason.when(F.lit(True), F.lit(f"key column {missing[0]} is not in the row"))
        else:
            key_null = F.lit(False)
            for k in row.key:
                key_null = key_null | image[k].isNull()
            reason = reason.when(op.isin("c", "u", "r", "d") & key_null, F.lit("no key value"))
    else:
        reason = reason.when(op != "t", F.lit("a truncate key on a row change"))
    checked = typed.select("*", reason.alias(REASON))
    # One pass makes both: change rows, and (where REASON is set) what a dead letter needs.
    return checked.select(
        *_change_columns(row, image, placeholder),
        F.col(REASON),
        F.when(F.col(REASON).isNotNull(), F.col("value_text")).alias("_value"),
        F.col("topic").alias("_topic"),
    )


def split(checked: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Decoded rows → (change rows, dead letters)."""
    good = checked.where(F.col(REASON).isNull()).drop(REASON, "_value", "_topic")
    bad = checked.where(F.col(REASON).isNotNull()).select(
        F.col("_topic").alias("topic"),
        F.col(PARTITION).alias("partition"),
        F.col(OFFSET).alias("offset"),
        F.col("_value").alias("value"),
        F.col(REASON).alias("reason"),
        F.current_timestamp().alias("at"),
    )
    return good, bad


def _change_columns(row: RowVersion, image: Column, placeholder: str) -> list[Column]:
    cols: list[Column] = []
    flags: list[Column] = []
    for c in row.columns:
        kind = row.types[c.name]
        raw = F.when(F.col("p.op") == "t", F.lit(None)).otherwise(image[c.name])
        if kind.toastable:
            hit = is_placeholder(raw, kind.raw, placeholder)
            flags.append(F.when(hit, F.lit(c.name)))
            value = F.when(hit, F.lit(None)).otherwise(kind.convert(raw))
        else:
            value = kind.convert(raw)
        cols.append(value.cast(kind.spark).alias(c.name))
    toasted = F.array_compact(F.array(*flags)) if flags else F.array().cast("array<string>")
    source = F.col("p.source")
    micros = F.coalesce(source["ts_us"], source["ts_ms"] * 1000, F.col("p.ts_ms") * 1000)
    return [
        *cols,
        F.col("p.op").alias(OP),
        F.coalesce(source["lsn"], F.lit(0)).alias(LSN),
        F.timestamp_micros(micros).alias(SOURCE_TS),
        toasted.alias(TOASTED),
        F.col("partition").alias(PARTITION),
        F.col("offset").alias(OFFSET),
    ]
