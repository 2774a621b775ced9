"""Kafka records of one table's topic → typed change rows, and dead letters for the rest.

An event comes in one of two forms, and a topic may hold both (a connector switched converters):
lean, as our LeanJsonConverter writes it (the payload alone, its schema's fingerprint in a
header, the schema in the schemas topic: see `registry`), or JsonConverter's with schemas on
(every record carrying its own schema). Keys are JsonConverter's with schemas either way. A batch
is decoded per schema version: the few distinct (value schema, key schema) pairs are collected,
each is turned into a Spark schema, and the payloads of that version are read with `from_json`
in one pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from changelake.changelog.exceptions import SchemaError
from changelake.changelog.key_changes import header_columns, header_value
from changelake.changelog.redelivery import POSITION, POSITION_HEADER, POSITION_TEXT, position
from changelake.changelog.registry import SCHEMA_HEADER
from changelake.changelog.schema import CORRUPT, RowVersion, row_version
from changelake.changelog.types import is_placeholder, postgres_spelling
from changelake.kafka_io import RawRecord

DEFAULT_PLACEHOLDER = "__debezium_unavailable_value"
OPS = ("c", "u", "d", "r", "t")
# JsonConverter writes every record as {"schema":{…},"payload":{…}}, compactly and in that order.
# The schema (~90% of the bytes) is never parsed per record: the record is cut at the first
# "payload": — the schema text before it only identifies the version (hashed; one sample per
# version is parsed on the driver), and the payload text after it is parsed once, typed, as the
# exact characters Debezium wrote (numbers are not re-printed, so decimals keep every digit).
_HEAD, _MARK = '{"schema":', '"payload":'
_ENVELOPE_PROBE = T.StructType(
    [T.StructField("schema", T.StringType()), T.StructField("payload", T.StringType())]
)
# Columns every change row carries besides the table's own.
LSN, OP, SOURCE_TS = "_cdc_lsn", "_cdc_op", "_cdc_source_ts"
PARTITION, OFFSET, TOASTED = "_kafka_partition", "_kafka_offset", "_toasted"
# The source transaction (Postgres xid) a change belongs to: histories keep it, so a read at one
# commit LSN can take whole transactions (lake/transactions.py); other sinks drop it.
TX = "_cdc_tx"
REASON = "_reason"
# Why a good row's dead letter was written too: a value it could not keep (see ColumnType.lost).
NOTE = "_note"
_DOES_NOT_MATCH = "value does not match its schema"


def envelopes(raw: DataFrame) -> DataFrame:
    """Each record as a version id and its payload text: small enough to cache, unlike an inline
    schema. Tombstones (null values) stay, so the batch's offsets are all known; decoding skips
    them: they only tell compaction to forget a deleted key, whose delete event came just before.
    Records of any other shape keep their text for the dead letters; a key update's records keep
    their key-change headers (see `key_changes`)."""
    value = F.col("value").cast("string")
    key = F.col("key").cast("string")
    fingerprint = header_value(raw, SCHEMA_HEADER)
    lean = fingerprint.isNotNull() & F.col("value").isNotNull()
    head = F.substring_index(value, _MARK, 1)  # everything before the first "payload":
    shaped = ~lean & value.startswith(_HEAD) & (F.octet_length(head) < F.octet_length(value))
    shaped &= value.endswith("}")
    # Cut by bytes, on the binary value: character positions (instr, substr of a string) walk
    # the whole ~8 KB record character by character several times, which doubled the cost.
    start = F.octet_length(head) + F.lit(len(_MARK) + 1)  # 1-based, just past the mark
    size = F.octet_length("value") - start  # up to, not including, the envelope's closing }
    payload = F.substring(F.col("value"), start, size).cast("string")
    key_head = F.when(key.startswith(_HEAD), F.substring_index(key, _MARK, 1))
    return raw.select(
        "topic",
        "partition",
        "offset",
        F.when(lean, value).when(shaped, payload).alias("payload_text"),
        F.when(lean, F.xxhash64(fingerprint, key_head))
        .when(shaped, F.xxhash64(head, key_head))
        .alias("version_id"),
        F.when(value.isNotNull() & ~lean & ~shaped, value).alias("odd_text"),
        *header_columns(raw),
        header_value(raw, POSITION_HEADER).alias(POSITION_TEXT),
    )


def malformed(env: DataFrame) -> DataFrame:
    """Records that are neither lean nor a Debezium JSON envelope with a schema, as dead
    letters."""
    probe = F.from_json("odd_text", _ENVELOPE_PROBE)
    reason = (
        F.when(F.get_json_object("odd_text", "$").isNull(), F.lit("not JSON"))
        .when(probe["payload"].isNull(), F.lit("no payload: not a Debezium change event"))
        .when(
            probe["schema"].isNull(),
            F.lit("no schema in the event (value.converter.schemas.enable must be true)"),
        )
        .otherwise(F.lit('not in JsonConverter\'s {"schema":…,"payload":…} form'))
    )
    return _letters(env.where(F.col("odd_text").isNotNull()), F.col("odd_text"), reason)


def _letters(records: DataFrame, value: Column, reason: Column) -> DataFrame:
    """Records as dead letters: where each is, its value as text, and why it was refused."""
    return records.select(
        "topic",
        "partition",
        "offset",
        value.alias("value"),
        reason.alias("reason"),
        F.current_timestamp().alias("at"),
    )


@dataclass(frozen=True)
class Version:
    version_id: int
    head: str | None  # inline records' text before the payload: '{"schema":{…},'; lean: None
    row: RowVersion


@dataclass(frozen=True)
class Missing:
    """A version of lean records whose schema could not be found: its records are dead letters."""

    version_id: int
    reason: str


Fetch = Callable[[int, int], RawRecord]  # (partition, offset) → the record


class Schemas(Protocol):
    """Lean records' schemas by fingerprint (`registry.SchemaRegistry`)."""

    def schema(self, fingerprint: str) -> str | None: ...

    def missing(self, fingerprint: str) -> str: ...


def _schema_text(head: str) -> str:
    body = head[len(_HEAD) :].rstrip()
    return body[:-1] if body.endswith(",") else body


def _head(raw: bytes | None) -> str | None:
    text = raw.decode() if raw is not None else ""
    return text.split(_MARK, 1)[0] if text.startswith(_HEAD) and _MARK in text else None


def versions(
    env: DataFrame,
    fetch: Fetch,
    schemas: Schemas,
    known: dict[int, Version] | None = None,
    firsts: Mapping[int, tuple[int, int]] | None = None,
) -> tuple[list[Version], list[Missing]]:
    """The distinct schema versions in a batch (usually one; two around a DDL change), and those
    whose schema cannot be found. Grouped by a hash, so no schema text is carried per record;
    the first record of a version not in `known` is read again from Kafka and its schema parsed
    here, from the record or, for a lean one, from `schemas` (and added to `known`, so a stream
    reads each version once, not once per batch). `firsts`: each version's first record
    (partition, offset) when the caller has counted them already; else one job finds them."""
    known = {} if known is None else known
    if firsts is None:
        rows = (
            env.where(F.col("version_id").isNotNull())
            .groupBy("version_id")
            .agg(F.min(F.struct("partition", "offset")).alias("first"))
            .collect()
        )
        firsts = {int(v): (int(f["partition"]), int(f["offset"])) for v, f in rows}
    found, missing = [], []
    for vid, (partition, offset) in sorted(firsts.items()):
        if vid not in known:
            record = fetch(partition, offset)
            key_head = _head(record.key)
            key_schema = _schema_text(key_head) if key_head else None
            header = record.headers.get(SCHEMA_HEADER)
            if header is not None and record.value is not None:
                fingerprint = header.decode("ascii", "replace")
                text = schemas.schema(fingerprint)
                if text is None:
                    missing.append(Missing(vid, schemas.missing(fingerprint)))
                    continue
                known[vid] = Version(vid, None, row_version(text, key_schema))
            else:
                head = _head(record.value)
                if head is None:
                    raise SchemaError(f"record at offset {offset} changed while being read")
                known[vid] = Version(vid, head, row_version(_schema_text(head), key_schema))
        found.append(known[vid])
    return found, missing


def unresolved(env: DataFrame, missing: list[Missing]) -> DataFrame:
    """The records of versions whose schema could not be found, as dead letters."""
    reason = F.lit(None).cast("string")
    for m in missing:
        reason = F.when(F.col("version_id") == F.lit(m.version_id), F.lit(m.reason)).otherwise(
            reason
        )
    records = env.where(F.col("version_id").isin([m.version_id for m in missing]))
    return _letters(records, F.col("payload_text"), reason)


def _of_version(env: DataFrame, version: Version) -> DataFrame:
    return env.where(F.col("version_id") == F.lit(version.version_id))


def decode(env: DataFrame, version: Version, placeholder: str, events: bool = False) -> DataFrame:
    """Typed change rows for the records of one schema version, each with the REASON it cannot
    be applied (NULL for a good one): see `split`. `events`: an event table's, which need no key,
    take an update's unchanged TOASTed values from its old row (REPLICA IDENTITY FULL) and carry
    where Debezium read them (`redelivery`)."""
    row = version.row
    record = T.StructType([*row.payload_struct().fields, T.StructField(CORRUPT, T.StringType())])
    # from_json puts the whole payload in CORRUPT when any field fails to parse (a value that
    # overflows its decimal, text in a number) instead of quietly making that field NULL.
    parsed = F.from_json("payload_text", record, {"columnNameOfCorruptRecord": CORRUPT})
    typed = _of_version(env, version).select("*", parsed.alias("p"))
    op = F.col("p.op")
    image = F.when(op == "d", F.col("p.before")).otherwise(F.col("p.after"))
    reason = (
        F.when(
            F.col("p").isNull() | op.isNull() | F.col(f"p.{CORRUPT}").isNotNull(),
            F.lit(_DOES_NOT_MATCH),
        )
        .when(_malformed(row, F.col("p.before"), F.col("p.after")), F.lit(_DOES_NOT_MATCH))
        .when(~op.isin(*OPS), F.concat(F.lit("unknown operation: "), op))
        .when(op.isin("c", "u", "r") & F.col("p.after").isNull(), F.lit("no row image (after)"))
    )
    if not events:  # an event table's changes need no key (a truncate is an event too)
        reason = _key_reason(reason, row, image, op)
    checked = typed.select("*", reason.alias(REASON), _note(row, image, op).alias(NOTE))
    # One pass makes both: change rows, and (where REASON or NOTE is set) what a dead letter needs.
    lettered = F.col(REASON).isNotNull() | F.col(NOTE).isNotNull()
    return checked.select(
        *_change_columns(row, image, placeholder, F.col("p.before") if events else None),
        *([position(F.col(POSITION_TEXT)).alias(POSITION)] if events else []),
        F.col(REASON),
        F.when(F.col(REASON).isNull(), F.col(NOTE)).alias(NOTE),
        F.when(lettered, _as_written(version)).alias("_value"),
        F.col("topic").alias("_topic"),
    )


def _malformed(row: RowVersion, *images: Column) -> Column:
    """True where a value of either row image is not one of its column's type."""
    found = F.lit(False)
    for c in row.columns:
        malformed = row.types[c.name].malformed
        if malformed is not None:
            for image in images:
                found = found | F.coalesce(malformed(image[c.name]), F.lit(False))
    return found


def _note(row: RowVersion, image: Column, op: Column) -> Column:
    """What of a written row's values the lake cannot hold, in one sentence (NULL: nothing; a
    delete writes no values)."""
    found = []
    for c in row.columns:
        kind = row.types[c.name]
        if kind.lost is not None:
            value = image[c.name]
            if isinstance(kind.raw, T.ArrayType):
                said = F.lit(f"{c.name} holds NaN")
            else:
                said = F.concat(F.lit(f"{c.name} = "), postgres_spelling(value))
            found.append(F.when(kind.lost(value), said))
    if not found:
        return F.lit(None).cast("string")
    said = F.concat_ws(", ", *found)  # concat_ws skips the NULLs
    why = ": no decimal holds NaN or an infinity, so the row was applied with NULL there"
    return F.when((said != "") & op.isin("c", "u", "r"), F.concat(said, F.lit(why)))


def _key_reason(reason: Column, row: RowVersion, image: Column, op: Column) -> Column:
    """`reason` extended by what a keyed table's change lacks of its key."""
    if row.truncate:
        return reason.when(op != "t", F.lit("a truncate key on a row change"))
    missing = [k for k in row.key if k not in row.names]
    if not row.key:
        return reason.when(F.lit(True), F.lit("the key has no schema: not a Debezium key"))
    if missing:
        return reason.when(F.lit(True), F.lit(f"key column {missing[0]} is not in the row"))
    key_null, key_lost = F.lit(False), F.lit(False)
    for k in row.key:
        key_null = key_null | image[k].isNull()
        lost = row.types[k].lost
        if lost is not None:  # a NaN in a decimal key column: NULL would match no row
            key_lost = key_lost | F.coalesce(lost(image[k]), F.lit(False))
    rows = op.isin("c", "u", "r", "d")
    return reason.when(rows & key_null, F.lit("no key value")).when(
        rows & key_lost, F.lit("a key column holds NaN, which no decimal holds")
    )


def _as_written(version: Version) -> Column:
    """A record's value as Kafka holds it, from its payload text."""
    if version.head is None:
        return F.col("payload_text")
    return F.concat(F.lit(version.head), F.lit(_MARK), F.col("payload_text"), F.lit("}"))


def split(checked: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Decoded rows → (change rows, dead letters). A row with a NOTE is both: applied, and
    lettered with what it lost."""
    good = checked.where(F.col(REASON).isNull()).drop(REASON, NOTE, "_value", "_topic")
    bad = checked.where(F.col(REASON).isNotNull() | F.col(NOTE).isNotNull()).select(
        F.col("_topic").alias("topic"),
        F.col(PARTITION).alias("partition"),
        F.col(OFFSET).alias("offset"),
        F.col("_value").alias("value"),
        F.coalesce(F.col(REASON), F.col(NOTE)).alias("reason"),
        F.current_timestamp().alias("at"),
    )
    return good, bad


def _change_columns(
    row: RowVersion, image: Column, placeholder: str, before: Column | None = None
) -> list[Column]:
    cols: list[Column] = []
    flags: list[Column] = []
    for c in row.columns:
        kind = row.types[c.name]
        raw = F.when(F.col("p.op") == "t", F.lit(None)).otherwise(image[c.name])
        if kind.toastable:
            hit = is_placeholder(raw, kind.raw, placeholder)
            if before is not None:  # the old row, when it has the value, holds it unchanged
                raw = F.when(hit & before[c.name].isNotNull(), before[c.name]).otherwise(raw)
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
        F.coalesce(source["lsn"], _stream_position(source), F.lit(0)).alias(LSN),
        F.timestamp_micros(micros).alias(SOURCE_TS),
        toasted.alias(TOASTED),
        F.col("partition").alias(PARTITION),
        F.col("offset").alias(OFFSET),
        source["txId"].alias(TX),
    ]


def _stream_position(source: Column) -> Column:
    """An incremental snapshot's read (a table added later, `verify --repair`) has no `lsn`; its
    `sequence` holds where streaming stood when Debezium sent it, at its chunk's closing
    watermark: past every change streamed before it, below every change streamed after. As its
    LSN, the guard lets it replace what those earlier changes left, and never a later change."""
    return F.get_json_object(source["sequence"], "$[1]").cast("long")
