"""Debezium's field schemas → Spark types, and the expressions that turn the JSON into them.

Each source column is read by `from_json` as its *raw* type (what the JSON holds: days since the
epoch, microseconds, ISO text, base64) and converted to the *Spark* type the Delta column keeps.
Numerics stay decimals with their source precision and scale; nothing becomes a float that was
not one at the source. Debezium sends a numeric in one of two forms, by the connector's
`decimal.handling.mode`: `precise` (a JSON number, its precision and scale in the schema), which
fails the connector's task on a NaN; or `string` (the shipped connectors'), its text, precision
and scale in the `column.propagate.source.type` parameters, which carries NaN and ±Infinity too:
a decimal column holds NULL for them, and the row's dead letter says so (`ColumnType.lost`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from changelake.changelog.exceptions import SchemaError

Convert = Callable[[Column], Column]
MAX_DECIMAL_PRECISION = 38  # Spark's (and Delta's) limit


@dataclass(frozen=True)
class SourceColumn:
    """One field of Debezium's row schema, as the JSON converter describes it."""

    name: str
    connect_type: str  # int16, int32, int64, float, double, boolean, string, bytes, array, …
    logical: str | None = None  # e.g. io.debezium.time.Date
    params: Mapping[str, str] = field(default_factory=dict)
    optional: bool = True
    items: SourceColumn | None = None  # the element of an array


def source_column(spec: Mapping[str, Any]) -> SourceColumn:
    """Parse one entry of a JsonConverter struct schema's `fields`."""
    items = spec.get("items")
    return SourceColumn(
        name=str(spec.get("field", "")),
        connect_type=str(spec["type"]),
        logical=spec.get("name"),
        params={str(k): str(v) for k, v in (spec.get("parameters") or {}).items()},
        optional=bool(spec.get("optional", True)),
        items=source_column(items) if isinstance(items, Mapping) else None,
    )


@dataclass(frozen=True)
class ColumnType:
    raw: T.DataType  # what from_json reads from the event
    spark: T.DataType  # what the Delta column holds
    convert: Convert  # raw column → Spark column
    toastable: bool = False  # Postgres may send it as "unchanged TOAST" (the placeholder)
    # Where a raw value has no exact form in the Spark type (a numeric NaN in a decimal column):
    # the row keeps NULL there, and its dead letter names the value.
    lost: Convert | None = None
    # Where a raw value is not one of its type at all (text in a numeric sent as text): the
    # record is a dead letter, as from_json makes one of a value that does not parse.
    malformed: Convert | None = None


def _same(c: Column) -> Column:
    return c


_INTEGERS: dict[str, T.DataType] = {
    "int8": T.ByteType(),
    "int16": T.ShortType(),
    "int32": T.IntegerType(),
    "int64": T.LongType(),
}
_PLAIN: dict[str, T.DataType] = {
    **_INTEGERS,
    # JsonConverter names Connect's FLOAT32 and FLOAT64 "float" and "double".
    "float": T.FloatType(),
    "double": T.DoubleType(),
    "boolean": T.BooleanType(),
}


def _ntz(c: Column) -> Column:
    # The session time zone is UTC (changelake.spark), so the instant's wall clock is the value.
    return c.cast(T.TimestampNTZType())


def _time_of_day(micros: Column) -> Column:
    """Microseconds after midnight → `HH:MM:SS[.ffffff]`, trailing zeros trimmed as Postgres
    prints a `time`."""
    seconds = F.floor(micros / 1_000_000)
    fraction = micros - seconds * 1_000_000
    hms = F.format_string(
        "%02d:%02d:%02d", F.floor(seconds / 3600), F.floor(seconds / 60) % 60, seconds % 60
    )
    digits = F.regexp_replace(F.lpad(fraction.cast("string"), 6, "0"), "0+$", "")
    return F.when(micros.isNull(), None).otherwise(
        F.when(fraction == 0, hms).otherwise(F.concat(hms, F.lit("."), digits))
    )


def _decimal_text(value: Any) -> str | None:
    """Debezium's VariableScaleDecimal struct {scale, value (two's-complement bytes)} → text."""
    if value is None or value["value"] is None:
        return None
    unscaled = int.from_bytes(bytes(value["value"]), "big", signed=True)
    # Built from text, not with arithmetic, which would round to the context's 28 digits; printed
    # in plain notation, as Postgres prints it (0.0000001, not 1E-7).
    return format(Decimal(f"{unscaled}E{-int(value['scale'] or 0)}"), "f")


_VARIABLE_DECIMAL = T.StructType(
    [T.StructField("scale", T.IntegerType()), T.StructField("value", T.BinaryType())]
)


def _variable_decimal(c: Column) -> Column:
    # Row at a time, as written (with pandas installed Spark would batch it through Arrow).
    udf = F.udf(_decimal_text, T.StringType(), useArrow=False)
    return udf(c)


def _temporal(col: SourceColumn) -> ColumnType | None:
    micros_per = {"io.debezium.time.Timestamp": 1000, "io.debezium.time.MicroTimestamp": 1}
    if col.logical == "io.debezium.time.Date":
        return ColumnType(T.IntegerType(), T.DateType(), F.date_from_unix_date)
    if col.logical in micros_per:
        scale = micros_per[col.logical]
        return ColumnType(
            T.LongType(), T.TimestampNTZType(), lambda c: _ntz(F.timestamp_micros(c * scale))
        )
    if col.logical == "io.debezium.time.NanoTimestamp":
        return ColumnType(
            T.LongType(), T.TimestampNTZType(), lambda c: _ntz(F.timestamp_micros(c / 1000))
        )
    if col.logical == "io.debezium.time.ZonedTimestamp":
        return ColumnType(T.StringType(), T.TimestampType(), lambda c: c.cast(T.TimestampType()))
    if col.logical == "io.debezium.time.MicroTime":
        return ColumnType(T.LongType(), T.StringType(), _time_of_day)
    if col.logical == "io.debezium.time.Time":
        return ColumnType(T.IntegerType(), T.StringType(), lambda c: _time_of_day(c * 1000))
    return None


def _decimal(col: SourceColumn) -> ColumnType:
    scale = int(col.params.get("scale", "0"))
    precision = int(col.params.get("connect.decimal.precision", "0") or 0)
    if precision == 0:
        # Debezium names no precision for `money`: a 64-bit count of cents, 19 digits at most.
        precision = MAX_DECIMAL_PRECISION
    if precision <= MAX_DECIMAL_PRECISION:
        dtype = T.DecimalType(precision, scale)
        return ColumnType(dtype, dtype, _same)
    # Spark's JSON reader would round a wider number through a double: refuse, loudly.
    raise SchemaError(
        f"column {col.name}: numeric({precision},{scale}) is wider than Spark's decimal(38)",
        "narrow the column, or set the connector's decimal.handling.mode to string with "
        'column.propagate.source.type ".*" (as `connectors init` writes it): such a column is '
        "then kept as its exact text, and the others stay decimals",
    )


# Debezium's text for a numeric's special values (decimal.handling.mode=string) → Postgres's.
SPECIAL_NUMERICS = {"NAN": "NaN", "POSITIVE_INFINITY": "Infinity", "NEGATIVE_INFINITY": "-Infinity"}
_SOURCE_TYPE, _LENGTH, _SCALE = (
    f"__debezium.source.column.{p}" for p in ("type", "length", "scale")
)  # column.propagate.source.type's parameters


# Java's BigDecimal.toString, which Debezium sends: scientific below 1E-6 (1E-7, 1.23E-7, 0E-10).
_SCIENTIFIC = r"^(-?)([0-9])(?:\.([0-9]+))?E([+-]?[0-9]+)$"


def postgres_spelling(c: Column) -> Column:
    """A numeric's text as Postgres prints it: plain notation with its scale (0.0000001, and
    0E-10 as 0.0000000000), NaN, Infinity, -Infinity."""
    spelled = F.when(c.rlike(_SCIENTIFIC), _plain(c)).otherwise(c)
    for debezium, postgres in SPECIAL_NUMERICS.items():
        spelled = F.when(c == debezium, F.lit(postgres)).otherwise(spelled)
    return spelled


def _plain(c: Column) -> Column:
    """Scientific notation → plain, by moving the point: digits d₁…dₙ (the mantissa's, point
    removed) with the point after position p = 1 + exponent."""
    sign = F.regexp_extract(c, _SCIENTIFIC, 1)
    digits = F.concat(F.regexp_extract(c, _SCIENTIFIC, 2), F.regexp_extract(c, _SCIENTIFIC, 3))
    point = F.regexp_extract(c, _SCIENTIFIC, 4).cast("int") + 1
    width = F.length(digits)
    body = (
        F.when(point <= 0, F.concat(F.lit("0."), F.repeat(F.lit("0"), -point), digits))
        .when(point >= width, F.concat(digits, F.repeat(F.lit("0"), point - width)))
        .otherwise(
            F.concat(digits.substr(F.lit(1), point), F.lit("."), digits.substr(point + 1, width))
        )
    )
    return F.concat(sign, body)


def _numeric_text(col: SourceColumn) -> ColumnType | None:
    """A numeric sent as text (decimal.handling.mode=string), typed by the source column's type,
    precision and scale that column.propagate.source.type adds: a decimal when it fits Spark's
    (money: decimal(38,2), Debezium's money.fraction.digits), else the exact text, as Postgres
    prints it. None: not such a column (a plain string, or no source type to go by)."""
    kind = col.params.get(_SOURCE_TYPE, "").upper()
    if kind == "MONEY":
        return _text_decimal(T.DecimalType(MAX_DECIMAL_PRECISION, 2))
    if kind not in ("NUMERIC", "DECIMAL"):
        return None
    precision, scale = int(col.params.get(_LENGTH) or 0), int(col.params.get(_SCALE) or 0)
    if 0 < precision <= MAX_DECIMAL_PRECISION:
        return _text_decimal(T.DecimalType(precision, scale))
    # Unconstrained (length 0), or wider than Spark's decimals: exact text, NaN and ±Infinity too
    # (a value of thousands of digits can be TOASTed, and sent unchanged as the placeholder).
    return ColumnType(T.StringType(), T.StringType(), postgres_spelling, toastable=True)


def _text_decimal(dtype: T.DecimalType) -> ColumnType:
    def special(c: Column) -> Column:
        return c.isin(*SPECIAL_NUMERICS)

    def convert(c: Column) -> Column:
        return F.when(special(c), F.lit(None)).otherwise(c.try_cast(dtype))

    def malformed(c: Column) -> Column:  # not a number, or more digits than the type holds
        return c.isNotNull() & ~special(c) & c.try_cast(dtype).isNull()

    return ColumnType(T.StringType(), dtype, convert, lost=special, malformed=malformed)


def column_type(col: SourceColumn) -> ColumnType:
    """How one Debezium field is read and stored."""
    temporal = _temporal(col)
    if temporal is not None:
        return temporal
    if col.connect_type == "string" and (numeric := _numeric_text(col)) is not None:
        return numeric
    if col.logical == "org.apache.kafka.connect.data.Decimal":
        return _decimal(col)
    if col.logical == "io.debezium.data.VariableScaleDecimal":
        return ColumnType(_VARIABLE_DECIMAL, T.StringType(), _variable_decimal)
    if col.connect_type in _PLAIN:
        dtype = _PLAIN[col.connect_type]
        return ColumnType(dtype, dtype, _same)
    if col.connect_type == "string":  # text, varchar, json(b), uuid, xml, enums, zoned times
        return ColumnType(T.StringType(), T.StringType(), _same, toastable=True)
    if col.connect_type == "bytes":  # bytea, bit strings
        return ColumnType(T.BinaryType(), T.BinaryType(), _same, toastable=True)
    if col.connect_type == "array" and col.items is not None:
        return _array(_typed_items(col))
    # Anything else (geometry, ranges as structs…) is kept as the event's JSON text.
    return ColumnType(T.StringType(), T.StringType(), _same)


def _typed_items(array: SourceColumn) -> SourceColumn:
    """An array's element with the source type its array's parameters name (`_NUMERIC`: the
    element is a NUMERIC of the array's precision and scale)."""
    assert array.items is not None
    kind = array.params.get(_SOURCE_TYPE, "")
    if array.items.connect_type != "string" or not kind.startswith("_"):
        return array.items
    params = {
        _SOURCE_TYPE: kind[1:],
        _LENGTH: array.params.get(_LENGTH, ""),
        _SCALE: array.params.get(_SCALE, ""),
    }
    return replace(array.items, params={**array.items.params, **params})


def _array(items: SourceColumn) -> ColumnType:
    element = column_type(items)
    convert: Convert = (
        _same if element.convert is _same else (lambda c: F.transform(c, element.convert))
    )
    lost, malformed = element.lost, element.malformed  # an element's is the array's
    return ColumnType(
        T.ArrayType(element.raw),
        T.ArrayType(element.spark),
        convert,
        toastable=True,
        lost=None if lost is None else (lambda c: F.exists(c, lost)),
        malformed=None if malformed is None else (lambda c: F.exists(c, malformed)),
    )


def is_placeholder(raw: Column, dtype: T.DataType, placeholder: str) -> Column:
    """True where Debezium sent its unchanged-TOAST placeholder instead of the value."""
    if isinstance(dtype, T.StringType):
        return F.coalesce(raw == F.lit(placeholder), F.lit(False))
    if isinstance(dtype, T.BinaryType):
        return F.coalesce(raw == F.lit(bytearray(placeholder.encode())), F.lit(False))
    if isinstance(dtype, T.ArrayType) and isinstance(dtype.elementType, T.StringType):
        return F.coalesce(
            (F.size(raw) == 1) & (F.element_at(raw, 1) == F.lit(placeholder)), F.lit(False)
        )
    if isinstance(dtype, T.ArrayType) and isinstance(dtype.elementType, T.IntegralType):
        # An integer array's placeholder is the placeholder's character codes, one per element.
        codes = F.array(*(F.lit(ord(ch)).cast(dtype.elementType) for ch in placeholder))
        return F.coalesce(raw == codes, F.lit(False))
    return F.lit(False)
