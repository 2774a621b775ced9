"""A batch's decoding across batches of one stream: each schema version is fetched from Kafka
once, lean records (payload + fingerprint header) decode like inline ones, an unknown
fingerprint makes dead letters naming it, and the batch's aggregations count bad records (what
lets the apply skip a separate count), with a local Spark session."""

from __future__ import annotations

import json
from decimal import Decimal

from pyspark.sql import DataFrame, SparkSession

from changelake.apply.batch_stats import BatchStats, add_change_stats, record_stats
from changelake.changelog.batch import Decoded, decode_batch
from changelake.changelog.decode import DEFAULT_PLACEHOLDER, Version, envelopes
from changelake.changelog.registry import SCHEMA_HEADER
from changelake.kafka_io import RawRecord

RAW = "topic string, partition int, offset long, key binary, value binary"
LEAN = f"{RAW}, headers array<struct<key: string, value: binary>>"
COMPACT = (",", ":")
ROW = {
    "type": "struct",
    "optional": True,
    "name": "p.public.t.Value",
    "fields": [
        {"type": "int32", "optional": False, "field": "id"},
        {"type": "string", "optional": True, "field": "name"},
    ],
}
VALUE_SCHEMA = {
    "type": "struct",
    "name": "p.public.t.Envelope",
    "optional": False,
    "fields": [
        {**ROW, "field": "before"},
        {**ROW, "field": "after"},
        {"type": "struct", "fields": [], "optional": False, "field": "source"},
        {"type": "string", "optional": False, "field": "op"},
    ],
}
KEY_SCHEMA = {
    "type": "struct",
    "name": "p.public.t.Key",
    "optional": False,
    "fields": [{"type": "int32", "optional": False, "field": "id"}],
}


def payload(offset: int, key: int, name: str) -> dict[str, object]:
    source = {"lsn": 1000 + offset, "ts_us": 1, "ts_ms": 1}
    return {"before": None, "after": {"id": key, "name": name}, "op": "c", "source": source}


def record(offset: int, key: int, name: str) -> tuple[str, int, int, bytes, bytes]:
    """As JsonConverter writes it, schemas on."""
    k = {"schema": KEY_SCHEMA, "payload": {"id": key}}
    v = {"schema": VALUE_SCHEMA, "payload": payload(offset, key, name)}
    return (
        "t",
        0,
        offset,
        json.dumps(k, separators=COMPACT).encode(),
        json.dumps(v, separators=COMPACT).encode(),
    )


def lean(offset: int, key: int, name: str, fingerprint: str = "f1") -> tuple[object, ...]:
    """As LeanJsonConverter writes it: the payload alone, the schema named in a header."""
    _, partition, _, k, _ = record(offset, key, name)
    v = json.dumps(payload(offset, key, name), separators=COMPACT).encode()
    return ("t", partition, offset, k, v, [(SCHEMA_HEADER, fingerprint.encode())])


class Schemas:
    """The schemas topic holding one schema, as fingerprint f1."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def schema(self, fingerprint: str) -> str | None:
        self.asked.append(fingerprint)
        return json.dumps(VALUE_SCHEMA) if fingerprint == "f1" else None

    def missing(self, fingerprint: str) -> str:
        return f"unknown schema fingerprint {fingerprint}"


def fetcher(rows: dict[int, tuple[object, ...]], fetched: list[int] | None = None):  # type: ignore[no-untyped-def]
    def fetch(partition: int, offset: int) -> RawRecord:
        if fetched is not None:
            fetched.append(offset)
        row = rows[offset]
        headers = dict(row[5]) if len(row) > 5 else {}  # type: ignore[call-overload]
        return RawRecord(row[3], row[4], headers)  # type: ignore[arg-type]

    return fetch


def test_a_schema_version_is_fetched_once_per_stream(spark: SparkSession) -> None:
    records = {o: record(o, o % 3, f"n{o}") for o in range(6)}
    fetched: list[int] = []
    fetch = fetcher(records, fetched)  # type: ignore[arg-type]
    known: dict[int, Version] = {}
    for batch in ([0, 1, 2], [3, 4], [5]):
        raw = spark.createDataFrame([records[o] for o in batch], RAW)
        decoded = decode_batch(envelopes(raw), "t", DEFAULT_PLACEHOLDER, fetch, Schemas(), known)
        assert decoded.key == ("id",) and decoded.columns.names == ["id", "name"]
    assert fetched == [0] and len(known) == 1


def batch_stats(env: DataFrame, decoded: Decoded) -> BatchStats:
    """One topic's stats, as the apply counts them: the records', then the decoded rows'."""
    return add_change_stats(record_stats(env)["t"], decoded)


def test_the_batch_stats_count_records_changes_and_bad_records(spark: SparkSession) -> None:
    rows = [
        record(0, 1, "a"),
        record(1, 2, "b"),
        ("t", 0, 2, b"{}", b"not json"),
        record(3, 1, "c"),
    ]
    env = envelopes(spark.createDataFrame(rows, RAW))
    decoded = decode_batch(env, "t", DEFAULT_PLACEHOLDER, fetcher(dict(enumerate(rows))), Schemas())
    stats = batch_stats(env, decoded)
    assert (stats.records, stats.changes, stats.bad) == (4, 3, 1)
    assert stats.offsets == {"0": 4} and stats.max_lsn == 1003
    assert decoded.errors.count() == stats.bad


def test_lean_and_inline_records_of_one_topic_decode_alike(spark: SparkSession) -> None:
    rows = [lean(0, 1, "a"), (*record(1, 2, "b"), []), lean(2, 3, "c"), (*record(3, 4, "d"), [])]
    schemas = Schemas()
    env = envelopes(spark.createDataFrame(rows, LEAN))
    decoded = decode_batch(env, "t", DEFAULT_PLACEHOLDER, fetcher(dict(enumerate(rows))), schemas)
    assert decoded.key == ("id",) and decoded.columns.names == ["id", "name"]
    assert decoded.changes is not None
    got = sorted((r["id"], r["name"], r["_cdc_lsn"]) for r in decoded.changes.collect())
    assert got == [(1, "a", 1000), (2, "b", 1001), (3, "c", 1002), (4, "d", 1003)]
    assert schemas.asked == ["f1"]  # one lookup for the lean version; the inline one needs none
    assert batch_stats(env, decoded).bad == 0


def test_an_unknown_fingerprint_makes_dead_letters_naming_it(spark: SparkSession) -> None:
    rows = [lean(0, 1, "a"), lean(1, 2, "b", fingerprint="ff00"), lean(2, 3, "c")]
    env = envelopes(spark.createDataFrame(rows, LEAN))
    decoded = decode_batch(env, "t", DEFAULT_PLACEHOLDER, fetcher(dict(enumerate(rows))), Schemas())
    assert decoded.changes is not None
    assert sorted(r["id"] for r in decoded.changes.collect()) == [1, 3]
    stats = batch_stats(env, decoded)
    assert (stats.records, stats.changes, stats.bad) == (3, 2, 1)
    (letter,) = decoded.errors.collect()
    assert letter["offset"] == 1 and letter["reason"] == "unknown schema fingerprint ff00"
    assert json.loads(letter["value"])["after"] == {"id": 2, "name": "b"}  # the record as sent


def keyless(offset: int, op: str, before: str | None, after: str | None) -> tuple[object, ...]:
    """A key-less table's change, as Debezium sends it: no Kafka key at all."""
    image = {"id": 1, "name": None}
    value = {
        "schema": VALUE_SCHEMA,
        "payload": {
            "before": None if before is None else {**image, "name": before},
            "after": None if after is None else {**image, "name": after},
            "op": op,
            "source": {"lsn": 1000 + offset, "ts_us": 1, "ts_ms": 1},
        },
    }
    return ("t", 0, offset, None, json.dumps(value, separators=COMPACT).encode())


def test_an_event_table_takes_key_less_changes_and_fills_unchanged_toast_from_the_old_row(
    spark: SparkSession,
) -> None:
    rows = [
        keyless(0, "c", None, "a"),
        keyless(1, "u", "a", DEFAULT_PLACEHOLDER),  # unchanged TOAST, the old row has it
        keyless(2, "u", None, DEFAULT_PLACEHOLDER),  # no old row: stays a placeholder
        keyless(3, "d", "a", None),
    ]
    env = envelopes(spark.createDataFrame(rows, RAW))
    fetch = fetcher(dict(enumerate(rows)))  # type: ignore[arg-type]
    events = decode_batch(env, "t", DEFAULT_PLACEHOLDER, fetch, Schemas(), events=True)
    assert events.key == () and events.changes is not None
    got = sorted(
        (r["_kafka_offset"], r["_cdc_op"], r["name"], r["_toasted"])
        for r in events.changes.collect()
    )
    assert got == [
        (0, "c", "a", []),
        (1, "u", "a", []),
        (2, "u", None, ["name"]),
        (3, "d", "a", []),
    ]
    assert batch_stats(env, events).bad == 0
    keyed = decode_batch(env, "t", DEFAULT_PLACEHOLDER, fetch, Schemas())  # not an event table
    assert {r["reason"] for r in keyed.errors.collect()} == {
        "the key has no schema: not a Debezium key"
    }


def numeric(name: str, kind: str, length: str, scale: str | None = None) -> dict[str, object]:
    """A numeric as decimal.handling.mode=string sends it: text, typed by the parameters
    column.propagate.source.type adds."""
    params = {"__debezium.source.column.type": kind, "__debezium.source.column.length": length}
    params |= {} if scale is None else {"__debezium.source.column.scale": scale}
    return {"type": "string", "optional": True, "parameters": params, "field": name}


NUMERIC_ROW = {
    **ROW,
    "fields": [
        {"type": "int32", "optional": False, "field": "id"},
        numeric("amount", "NUMERIC", "9", "2"),
        numeric("ratio", "NUMERIC", "0"),  # unconstrained
        numeric("wide", "NUMERIC", "50", "10"),  # beyond Spark's decimal(38)
        numeric("cash", "MONEY", "2147483647", "0"),
        {
            "type": "array",
            "items": {"type": "string", "optional": True},
            "optional": True,
            "parameters": {
                "__debezium.source.column.type": "_NUMERIC",
                "__debezium.source.column.length": "9",
                "__debezium.source.column.scale": "2",
            },
            "field": "amounts",
        },
    ],
}


def numeric_records(
    row: dict[str, object], images: list[dict[str, object]]
) -> list[tuple[object, ...]]:
    """Inserts of `images` into a table of schema `row` (its first field the key)."""
    schema = {
        **VALUE_SCHEMA,
        "fields": [
            {**row, "field": "before"},
            {**row, "field": "after"},
            *VALUE_SCHEMA["fields"][2:],  # type: ignore[index]
        ],
    }
    first = row["fields"][0]  # type: ignore[index]
    key_schema = {**KEY_SCHEMA, "fields": [first]}
    records = []
    for offset, image in enumerate(images):
        value = {"before": None, "after": image, "op": "c", "source": {"lsn": 1000 + offset}}
        k = {"schema": key_schema, "payload": {first["field"]: image[first["field"]]}}
        v = {"schema": schema, "payload": value}
        records.append(("t", 0, offset, json.dumps(k).encode(), json.dumps(v).encode()))
    return records


def test_numerics_sent_as_text_keep_their_decimal_types_and_a_nan_is_a_null_and_a_dead_letter(
    spark: SparkSession,
) -> None:
    images: list[dict[str, object]] = [
        {"id": 1, "amount": "12.50", "ratio": "1.50", "wide": "-1.23E-7", "cash": "-3.00",
         "amounts": ["1.50", None]},
        {"id": 2, "amount": "NAN", "ratio": "POSITIVE_INFINITY", "wide": "NAN", "cash": None,
         "amounts": None},
        {"id": 3, "amount": "0.00", "ratio": "1E-7", "wide": "0E-10", "cash": "0.00",
         "amounts": ["NAN"]},
        {"id": 4, "amount": "abc", "ratio": "1.5E+3", "wide": None, "cash": None,
         "amounts": None},
        {"id": 5, "amount": None, "ratio": "NEGATIVE_INFINITY", "wide": "1" * 40, "cash": None,
         "amounts": []},
    ]  # fmt: skip
    rows = numeric_records(NUMERIC_ROW, images)
    env = envelopes(spark.createDataFrame(rows, RAW))
    decoded = decode_batch(env, "t", DEFAULT_PLACEHOLDER, fetcher(dict(enumerate(rows))), Schemas())
    assert [(f.name, f.dataType.simpleString()) for f in decoded.columns.fields] == [
        ("id", "int"),
        ("amount", "decimal(9,2)"),
        ("ratio", "string"),
        ("wide", "string"),
        ("cash", "decimal(38,2)"),
        ("amounts", "array<decimal(9,2)>"),
    ]
    assert decoded.changes is not None
    got = sorted(tuple(r)[:6] for r in decoded.changes.collect())
    assert got == [
        (1, Decimal("12.50"), "1.50", "-0.000000123", Decimal("-3.00"), [Decimal("1.50"), None]),
        (2, None, "Infinity", "NaN", None, None),  # every row applied, NaN as NULL
        (3, Decimal("0.00"), "0.0000001", "0.0000000000", Decimal("0.00"), [None]),
        (5, None, "-Infinity", "1" * 40, None, []),
    ]  # and not 4: "abc" is no numeric; text as Postgres prints it, never 1E-7
    stats = batch_stats(env, decoded)
    assert (stats.records, stats.changes, stats.bad) == (5, 4, 3)
    reasons = {e["offset"]: e["reason"] for e in decoded.errors.collect()}
    why = ": no decimal holds NaN or an infinity, so the row was applied with NULL there"
    assert reasons == {
        1: "amount = NaN" + why,
        2: "amounts holds NaN" + why,
        3: "value does not match its schema",
    }


def test_a_nan_in_a_decimal_key_is_a_dead_letter_not_a_null_key(spark: SparkSession) -> None:
    row = {**ROW, "fields": [numeric("code", "NUMERIC", "9", "2"), numeric("n", "NUMERIC", "0")]}
    rows = numeric_records(row, [{"code": "1.50", "n": "1"}, {"code": "NAN", "n": "2"}])
    env = envelopes(spark.createDataFrame(rows, RAW))
    decoded = decode_batch(env, "t", DEFAULT_PLACEHOLDER, fetcher(dict(enumerate(rows))), Schemas())
    assert decoded.changes is not None
    assert [(r["code"], r["n"]) for r in decoded.changes.collect()] == [(Decimal("1.50"), "1")]
    (letter,) = decoded.errors.collect()
    assert letter["reason"] == "a key column holds NaN, which no decimal holds"
