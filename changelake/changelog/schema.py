"""One version of a table's row as Debezium describes it: columns, key and Spark types."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pyspark.sql import types as T

from changelake.changelog.exceptions import SchemaError
from changelake.changelog.types import ColumnType, SourceColumn, column_type, source_column

TRUNCATE_KEY = "dev.changelake.TruncateKey"  # see connect-smt/: truncate events keyed by LSN
CORRUPT = "_corrupt"

# The part of the envelope besides the row images that the pipeline reads.
SOURCE_STRUCT = T.StructType(
    [
        T.StructField("lsn", T.LongType()),
        T.StructField("ts_us", T.LongType()),
        T.StructField("ts_ms", T.LongType()),
        T.StructField("txId", T.LongType()),
        T.StructField("snapshot", T.StringType()),
        T.StructField("sequence", T.StringType()),  # '["<last commit LSN>", "<LSN>"]'
    ]
)


@dataclass(frozen=True)
class RowVersion:
    """The columns of one schema version of a table (the envelope's `after`), and its key."""

    columns: tuple[SourceColumn, ...]
    key: tuple[str, ...]
    truncate: bool = False  # the key is our truncate key, not the table's primary key

    @cached_property
    def types(self) -> dict[str, ColumnType]:
        return {c.name: column_type(c) for c in self.columns}

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def raw_struct(self) -> T.StructType:
        return T.StructType([T.StructField(c.name, self.types[c.name].raw) for c in self.columns])

    def spark_struct(self) -> T.StructType:
        return T.StructType([T.StructField(c.name, self.types[c.name].spark) for c in self.columns])

    def payload_struct(self) -> T.StructType:
        row = self.raw_struct()
        return T.StructType(
            [
                T.StructField("before", row),
                T.StructField("after", row),
                T.StructField("op", T.StringType()),
                T.StructField("source", SOURCE_STRUCT),
                T.StructField("ts_ms", T.LongType()),
            ]
        )


def _fields(schema: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(schema, dict) or not isinstance(schema.get("fields"), list):
        raise SchemaError(f"{where}: expected a struct schema with `fields`")
    return [f for f in schema["fields"] if isinstance(f, dict)]


def row_version(value_schema: str, key_schema: str | None) -> RowVersion:
    """Parse the JsonConverter schemas of an event's value and key."""
    try:
        value = json.loads(value_schema)
        key = json.loads(key_schema) if key_schema else None
    except ValueError as exc:
        raise SchemaError(f"an event's schema is not JSON: {exc}") from exc
    after = next((f for f in _fields(value, "value schema") if f.get("field") == "after"), None)
    if after is None:
        raise SchemaError("the value schema has no `after` field: not a Debezium envelope")
    columns = tuple(source_column(f) for f in _fields(after, "value schema `after`"))
    if key is None:
        return RowVersion(columns, ())
    if key.get("name") == TRUNCATE_KEY:
        return RowVersion(columns, (), truncate=True)
    return RowVersion(columns, tuple(str(f["field"]) for f in _fields(key, "key schema")))
