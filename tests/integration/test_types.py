"""Every supported Postgres type arrives in the Delta table exactly, edge values included, both
through the initial snapshot and through streamed changes (inserts, updates, TOAST placeholders).

Each edge row is inserted twice: before capture (id n, read by the snapshot) and after the first
run (id 100 + n, streamed). Values the pipeline cannot carry exactly are left out on purpose,
each named in the comment below the columns.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable

import pytest

from changelake import kafka_io
from changelake.changelog.registry import SCHEMA_HEADER
from tests.integration.pipeline_fixtures import Pipeline

pytestmark = pytest.mark.stack

COLUMNS = {
    "c_smallint": "smallint",
    "c_int": "int",
    "c_bigint": "bigint",
    "c_num38": "numeric(38,10)",
    "c_num52": "numeric(5,2)",
    "c_num": "numeric",  # unconstrained: kept as text
    "c_money": "money",  # decimal(38,2): Debezium names no precision for it
    "c_real": "real",
    "c_double": "double precision",
    "c_bool": "boolean",
    "c_ts": "timestamp",
    "c_ts3": "timestamp(3)",  # Debezium sends milliseconds, not microseconds
    "c_tstz": "timestamptz",
    "c_date": "date",
    "c_time": "time",
    "c_interval": "interval",
    "c_text": "text",
    "c_varchar": "varchar(10)",
    "c_jsonb": "jsonb",
    "c_uuid": "uuid",
    "c_bytea": "bytea",
    "c_ints": "int[]",
    "c_texts": "text[]",
}
TOASTABLE = ("c_text", "c_jsonb", "c_bytea", "c_ints", "c_texts")

# What the pipeline cannot carry exactly, so the rows below leave it out:
# - numeric NaN: a decimal column holds NULL for it, and a dead letter names it (test_own_database).
# - intervals with months or years: Debezium counts a month as 30.4375 days and a year as 365.25,
#   so '1 mon' is not '30 days'; intervals beyond ±2^63 µs are clamped without an error.
# - ±infinity and BC timestamps and dates: outside Spark's (and Python's) years 0001-9999.
# - time 24:00:00: arrives as "24:00:00", but psycopg cannot load it to compare.
# - dates in the Julian gap (1582-10-05..14): Debezium's snapshot shifts them by 10 days;
#   streamed they are right (STREAM_ONLY).
# - numeric(p > 38): wider than Spark's decimals; kept as its exact text.


def lit(text: str) -> str:
    """A SQL string literal (standard_conforming_strings: backslashes are plain characters)."""
    return "'" + text.replace("'", "''") + "'"


def array(items: list[str | None], of: str) -> str:
    return f"ARRAY[{', '.join('NULL' if i is None else lit(i) for i in items)}]::{of}[]"


UNICODE = (
    "emoji \U0001f389 family \U0001f469\u200d\U0001f469\u200d\U0001f467 flag \U0001f1ef\U0001f1f5,"
    " CJK 渡辺東京, combining e\u0301 n\u0303 (not normalised), RTL שלום,"
    " astral \U0001d518\U0001d52b, quote ' backslash \\ tab\t newline\n end"
)
JSON = (
    '{"nested": {"list": [1, -2.50, 1e-7, 12345678901234567890123, true, false, null, "日本🎉"],'
    ' "empty": {}, "none": [], "esc": "q\\"uote \\\\ \\n \\u00e9"}, "é🎉": {"a": {"b": {"c": 1}}}}'
)


def _big_values(seed: int) -> dict[str, str]:
    """Values stored out of line (STORAGE EXTERNAL), so an update leaving them unchanged sends
    Debezium's TOAST placeholder instead."""
    rng = random.Random(seed)
    alphabet = "abcxyz 0123 é渡辺東京日本語\U0001f389\U0001d518\u0301'\\\n"
    text = "".join(rng.choice(alphabet) for _ in range(110_000))  # ~200 KB of UTF-8
    words = [f"{rng.getrandbits(64):x}é" for _ in range(3000)]
    return {
        "c_text": lit(text),
        "c_jsonb": lit('{"words": [' + ", ".join(f'"{w}"' for w in words) + "]}"),
        "c_bytea": lit("\\x" + rng.randbytes(64_000).hex()),
        "c_ints": "'{"
        + ",".join(str(rng.randint(-(2**31), 2**31 - 1)) for _ in range(5000))
        + "}'",
        "c_texts": array([*words, None, ""], "text"),
    }


LOWS = {
    "c_smallint": "-32768",
    "c_int": "-2147483648",
    "c_bigint": "-9223372036854775808",
    "c_num38": "-99999.9999999999",  # all 38 digits: test_decimals_beyond_double_precision
    "c_num52": "-999.99",
    "c_num": "-123456789012345678901234567890.123456789",
    "c_money": "'-92233720368547758.08'",
    "c_real": "-3.4028235e38",
    "c_double": "-1.7976931348623157e308",
    "c_bool": "false",
    "c_ts": "'0001-01-01 00:00:00'",
    "c_ts3": "'0001-01-01 00:00:00'",
    "c_tstz": "'0001-01-01 00:00:00+00'",
    "c_date": "'0001-01-01'",
    "c_time": "'00:00:00'",
    "c_interval": "'-106751991 days -04:00:54.775808'",  # -2^63 µs
    "c_text": "''",
    "c_varchar": "''",
    "c_jsonb": "'{}'",
    "c_uuid": "'00000000-0000-0000-0000-000000000000'",
    "c_bytea": "'\\x'",
    "c_ints": "'{}'",
    "c_texts": "'{}'",
}
HIGHS = {
    "c_smallint": "32767",
    "c_int": "2147483647",
    "c_bigint": "9223372036854775807",
    "c_num38": "99999.9999999999",
    "c_num52": "999.99",
    "c_num": "123456789012345678901234567890.123456789",
    "c_money": "'92233720368547758.07'",
    "c_real": "3.4028235e38",
    "c_double": "1.7976931348623157e308",
    "c_bool": "true",
    "c_ts": "'9999-12-31 23:59:59.999999'",
    "c_ts3": "'9999-12-31 23:59:59.999'",
    "c_tstz": "'9999-12-31 23:59:59.999999+00'",
    "c_date": "'9999-12-31'",
    "c_time": "'23:59:59.999999'",
    "c_interval": "'106751991 days 04:00:54.775807'",  # 2^63 - 1 µs
    "c_text": lit(UNICODE),
    "c_varchar": lit("渡辺🎉e\u0301xyz12"),  # ten characters, more bytes
    "c_jsonb": lit(JSON),
    "c_uuid": "'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF'",
    "c_bytea": lit("\\x" + bytes(range(256)).hex()),
    "c_ints": "'{-2147483648,NULL,0,2147483647}'",
    "c_texts": array(["日本", "🎉", "", None, "NULL", "with,comma", 'quote"d', "e\u0301"], "text"),
}
SMALL = {
    "c_smallint": "-1",
    "c_int": "0",
    "c_bigint": "1",
    "c_num38": "-0.0000000001",
    "c_num52": "-0.01",
    "c_num": "-0.000001",
    "c_money": "'-0.01'",
    "c_real": "1.4e-45",  # smallest subnormal
    "c_double": "4.9e-324",
    "c_ts": "'1970-01-01 00:00:00'",
    "c_ts3": "'1969-12-31 23:59:59.999'",
    "c_tstz": "'1970-01-01 00:00:00+00'",
    "c_date": "'1970-01-01'",
    "c_time": "'12:00:00.5'",
    "c_interval": "'00:00:00.000001'",
    "c_text": lit(" "),
    "c_varchar": lit("a"),
    "c_jsonb": "'null'",  # JSON null, not SQL NULL
    "c_uuid": "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'",
    "c_bytea": "'\\x00'",
    "c_ints": "'{NULL}'",
    "c_texts": "'{\"\"}'",
}
HISTORIC = {
    "c_num38": "0.0000000001",
    "c_num52": "0.00",
    "c_num": "0.00000000000000000001",  # plain text, not 1E-20
    "c_real": "1.17549435e-38",  # smallest normal
    "c_double": "2.2250738585072014e-308",
    "c_ts": "'1900-01-01 00:00:00.000001'",
    "c_ts3": "'1500-06-15 12:00:00.001'",
    "c_tstz": "'1900-01-01 00:00:00+05:30'",
    "c_date": "'1582-10-04'",
    "c_time": "'00:00:00.000001'",
    "c_interval": "'1 day -00:00:00.000001'",
    "c_jsonb": "'\"just a string\"'",
    "c_texts": array(["\u0301", "🇯🇵"], "text"),
}
ZONES = {
    "c_num38": "1.5",
    "c_num": "123000",
    "c_money": "'1234567.5'",
    "c_real": "0.1",  # not a binary fraction: float4 0.10000000149...
    "c_double": "0.1",
    "c_ts": "'2262-04-11 23:47:16.854775'",
    "c_ts3": "'2024-02-29 12:34:56.789'",
    "c_tstz": "'2024-03-10 02:30:00.123456-08:00'",
    "c_date": "'1582-10-15'",
    "c_time": "'13:14:15.1234'",
    "c_interval": "'-3 days 04:05:06.789'",
    "c_jsonb": "'[1, 2.0, \"3\"]'",
}
EDGES = [
    {},  # NULL in every column
    LOWS,
    HIGHS,
    SMALL,
    HISTORIC,
    ZONES,
    {
        "c_tstz": "'1969-12-31 23:59:59.999999+14:00'",
        "c_ts": "'1969-12-31 23:59:59.999999'",
        "c_num": "-" + "9" * 200 + "." + "1" * 100,
    },
    {"c_tstz": "'2262-04-11 23:47:16.854776-12:00'", "c_ts": "'1500-06-15 12:00:00'"},
    {"c_real": "'NaN'", "c_double": "'-Infinity'", "c_tstz": "'1500-06-15 12:00:00+01:00'"},
    {"c_real": "'Infinity'", "c_double": "'NaN'", "c_num": "'NaN'"},
    {"c_real": "'-Infinity'", "c_double": "'Infinity'", "c_num": "'-Infinity'"},
    {"c_real": "'-0'", "c_double": "'-0'"},
    _big_values(1),
]
BIG = len(EDGES)  # the id of the row with out-of-line values (snapshot); BIG + 100 streamed
STREAM_ONLY = {"c_date": "'1582-10-10'", "c_ts": "'1582-10-10 00:00:00'"}  # the Julian gap


def insert(table: str, row_id: int, row: dict[str, str]) -> str:
    names = ", ".join(["id", *row])
    values = ", ".join([str(row_id), *row.values()])
    return f"INSERT INTO public.{table} ({names}) VALUES ({values})"


def update(table: str, row_id: int, row: dict[str, str]) -> str:
    sets = ", ".join(f"{c} = {v}" for c, v in row.items())
    return f"UPDATE public.{table} SET {sets} WHERE id = {row_id}"


def placeholders_sent(p: Pipeline, table: str, row_id: int) -> set[str]:
    """The columns the last update of a row carried as Debezium's TOAST placeholder."""
    marker = "__debezium_unavailable_value"
    forms = [
        marker,  # text, jsonb
        base64.b64encode(marker.encode()).decode(),  # bytea
        [marker],  # text[]
        [ord(c) for c in marker],  # int[]: the placeholder's character codes
    ]
    after: dict[str, object] = {}
    for record in kafka_io.read(p.settings.kafka_bootstrap, f"{p.prefix}.public.{table}"):
        payload = record.payload or {}
        if payload.get("op") == "u" and (payload.get("after") or {}).get("id") == row_id:
            after = payload["after"]
    return {column for column, value in after.items() if value in forms}


def test_every_type_arrives_exactly(pipeline: Callable[..., Pipeline], unique: str) -> None:
    t = f"types_{unique}"
    columns = ", ".join(f"{name} {kind}" for name, kind in COLUMNS.items())
    p = pipeline(
        [t],
        [
            f"CREATE TABLE public.{t} (id int PRIMARY KEY, {columns})",
            *(f"ALTER TABLE public.{t} ALTER COLUMN {c} SET STORAGE EXTERNAL" for c in TOASTABLE),
            *(insert(t, n, row) for n, row in enumerate(EDGES, start=1)),
        ],
    )
    p.run_once()
    assert p.assert_equal(t, ["id"]) == len(EDGES)

    changes = [
        # the same edge values again, streamed
        *(insert(t, 100 + n, row) for n, row in enumerate(EDGES, start=1)),
        insert(t, 200, STREAM_ONLY),
        # updates: every column to new edge values, to NULL, from NULL
        update(t, 2, HIGHS),
        update(t, 3, dict.fromkeys(COLUMNS, "NULL")),
        update(t, 1, SMALL),
        update(t, 4, LOWS),
        # out-of-line values left unchanged: the placeholder must keep the stored value, both
        # for a snapshot row and for a row inserted in the same batch
        update(t, BIG, {"c_smallint": "7"}),
        update(t, 100 + BIG, {"c_int": "7"}),
        # out-of-line values changed to other out-of-line values
        update(t, 5, _big_values(2)),
        f"DELETE FROM public.{t} WHERE id IN (6, 106)",
    ]
    for statement in changes:
        p.sql(statement)
    p.run_once()
    assert p.assert_equal(t, ["id"]) == 2 * len(EDGES) + 1 - 2  # + STREAM_ONLY - deleted
    # the placeholder path really ran, for every toastable type
    assert placeholders_sent(p, t, BIG) == set(TOASTABLE)


# The stock converter with schemas inline, as a user's own connector may have it.
STOCK_CONVERTER = {
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "true",
}


def test_decimals_beyond_double_precision(pipeline: Callable[..., Pipeline], unique: str) -> None:
    t = f"digits_{unique}"
    rows = [
        {"c_num38": "-9999999999999999999999999999.9999999999"},  # dead-lettered
        {"c_num38": "9999999999999999999999999999.9999999999"},
        {"c_num38": "1234567890123456789.0123456789"},  # silently rounded
    ]
    p = pipeline(
        [t],
        [
            f"CREATE TABLE public.{t} (id int PRIMARY KEY, c_num38 numeric(38,10))",
            *(insert(t, n, row) for n, row in enumerate(rows, start=1)),
        ],
        connector=STOCK_CONVERTER,  # users bring their own connectors: the same exact digits
    )
    p.caught_up()
    for n, row in enumerate(rows, start=101):  # streamed
        p.sql(insert(t, n, row))
    p.run_once()
    assert p.assert_equal(t, ["id"]) == 2 * len(rows)
    sent = list(kafka_io.read(p.settings.kafka_bootstrap, f"{p.prefix}.public.{t}"))
    # Inline schemas (the stock converter's), no lean schema header: only our stamp.
    assert sent and all(
        "schema" in r.value and SCHEMA_HEADER not in r.headers for r in sent if r.value
    )


def _megabytes(seed: int, size: int) -> str:
    """`size` bytes of text zlib cannot shrink much (Postgres compresses TOASTed values)."""
    rng = random.Random(seed)
    return "".join(
        rng.choices("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", k=size)
    )


def test_rows_of_megabytes_arrive_whole(pipeline: Callable[..., Pipeline], unique: str) -> None:
    """Over Kafka's default 1 MB, such a change record failed the connector's task, and with it
    the capture of every table of its database (MAX_RECORD_BYTES is the limit now)."""
    t = f"large_{unique}"
    p = pipeline(
        [t],
        [
            f"CREATE TABLE public.{t} (id int PRIMARY KEY, note text, doc text)",
            insert(t, 1, {"note": "'snapshot'", "doc": lit(_megabytes(1, 1_500_000))}),
        ],
    )
    p.run_once()
    assert p.assert_equal(t, ["id"]) == 1
    p.sql(insert(t, 2, {"note": "'streamed'", "doc": lit(_megabytes(2, 3_000_000))}))
    p.sql(update(t, 1, {"note": "'doc left unchanged'"}))  # the placeholder keeps 1.5 MB
    p.run_once()
    assert p.assert_equal(t, ["id"]) == 2
