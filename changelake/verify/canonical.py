"""One comparable form for a value as Postgres (psycopg), Delta (Spark) and OpenSearch give it.

Each side's reader hands rows of Python values; `canonical` maps them to a form in which equal
data compares equal and anything else does not: decimals by value, floats by repr (NaN and -0.0
kept apart), times in UTC, JSON by its parsed value, intervals in microseconds.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import struct
import uuid
from decimal import Decimal
from typing import Any

from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.types.numeric import FloatLoader

PLAIN_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?")


class Float4Loader(FloatLoader):
    """A `real` as the float4 it is (what Spark's FloatType hands Python), not the double nearest
    to its shortest decimal text."""

    def load(self, data: Buffer) -> float:
        value: float = struct.unpack("f", struct.pack("f", super().load(data)))[0]
        return value


class MoneyLoader(Loader):
    """A `money` as the Decimal it holds, from its text in the C locale's format (-$1,234.50),
    which `sides.connect` sets: psycopg would hand the text."""

    def load(self, data: Buffer) -> Decimal:
        text = bytes(data).decode()
        value = Decimal(re.sub(r"[^0-9.]", "", text))
        return -value if text.startswith("-") else value


def as_number(value: Any) -> Any:
    """A numeric the lake keeps as text (unconstrained), compared by value: Debezium's
    `precise` mode drops trailing zeros (1.50 arrives as 1.5), so the scale may be lost."""
    if isinstance(value, Decimal):
        # NaN and ±Infinity as Postgres and the lake spell them (str gives 'NaN', '-Infinity').
        return ("number", value.normalize()) if value.is_finite() else str(value)
    if isinstance(value, str) and PLAIN_NUMBER.fullmatch(value):
        return ("number", Decimal(value).normalize())
    return value


def as_json(value: Any) -> Any:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value)
    return ("json", json.dumps(json.loads(text), sort_keys=True))


def canonical(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, Decimal):  # by value: Spark hands 1E-10 in decimal(38,10) as 1.00E-10
        if not value.is_finite():  # NaN: a decimal column holds NULL for it (a dead letter says)
            return None
        return ("decimal", value.normalize())  # normalized, so equal values hash alike
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, dt.time) and value.tzinfo is None:
        return _time_text(value)
    if isinstance(value, dt.timedelta):  # an interval arrives as microseconds
        return value // dt.timedelta(microseconds=1)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return ("ts", value.isoformat())
    if isinstance(value, bytes | bytearray | memoryview):
        return ("bytes", bytes(value))
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return ("json", json.dumps(value, sort_keys=True))
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    return value


def _time_text(value: dt.time) -> str:
    """`HH:MM:SS[.ffffff]` with trailing zeros trimmed, as Postgres prints a `time`."""
    text = value.strftime("%H:%M:%S")
    return f"{text}.{value.microsecond:06d}".rstrip("0") if value.microsecond else text


def document_value(value: Any) -> Any:
    """A source value or a document's JSON value, in one form (the index keeps JSON types)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | Decimal | float):
        return ("number", Decimal(str(value)).normalize())
    if isinstance(value, dt.datetime):
        return ("time", value.astimezone(dt.UTC) if value.tzinfo else value.replace(tzinfo=dt.UTC))
    if isinstance(value, dt.date):
        return ("time", dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC))
    if isinstance(value, list | tuple):
        return [document_value(v) for v in value]
    if isinstance(value, str) and len(value) >= 20 and value[4] == "-" and value[10] == "T":
        try:
            parsed = dt.datetime.fromisoformat(value)
        except ValueError:
            return value
        return (
            "time",
            parsed.astimezone(dt.UTC) if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC),
        )
    return value
